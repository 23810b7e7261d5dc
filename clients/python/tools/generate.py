"""Writes the client's generated modules from the API's .proto: `make proto` runs it.

* ``sessionstore_client/_types/``: one dataclass per message and one IntEnum
  per enum, with the .proto's comments as their documentation: a module per
  section of the .proto (the messages under one of its ``// ---- title``
  headings), and ``enums.py``; ``sessionstore_client/types.py`` imports them all;
* ``sessionstore_client/_methods/``: one method per RPC, for the synchronous
  client and for the asyncio one, taking the request's fields as arguments: a
  module per section that declares requests, gathered in its ``__init__.py``;
* ``sessionstore_client/_proto/``: the protobuf modules the client sends and
  reads, compiled from the same .proto (and from the client's own
  ``rpc_status.proto``).

Run from the repository's root: ``python clients/python/tools/generate.py [OUT]``
writes under OUT (default: the client's ``src``), so a check can compare a
fresh run with what is committed. The package ``generator`` beside this script
does the work, a module per job.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from generator.api import Api
from generator.methods_modules import write_methods
from generator.paths import CLIENT_SRC
from generator.protoc import described, write_protobuf_modules
from generator.types_modules import write_types


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else CLIENT_SRC
    package = out / "sessionstore_client"
    api = Api(described())
    modules = write_types(api) | write_methods(api)
    for directory in ("_types", "_methods"):  # wholly generated: no module of a gone section
        for stale in sorted((package / directory).glob("*.py")):
            stale.unlink()
        (package / directory).mkdir(parents=True, exist_ok=True)
    for name, text in sorted(modules.items()):
        (package / name).write_text(text)
    _formatted([package / name for name in sorted(modules)])
    write_protobuf_modules(out)


def _formatted(paths: list[Path]) -> None:
    command = [sys.executable, "-m", "ruff", "format", "--quiet", "--config", "pyproject.toml"]
    subprocess.run([*command, *(str(path) for path in paths)], check=True)


if __name__ == "__main__":
    main()
