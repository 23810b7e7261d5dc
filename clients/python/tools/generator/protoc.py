"""protoc run from this interpreter: the .proto's descriptor, the client's protobuf modules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2

from .paths import CLIENT_SRC, PROTO, STATUS_PROTO


def described() -> descriptor_pb2.FileDescriptorProto:
    """The API's .proto descriptor, with its comments and where each declaration is."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.bin"
        _protoc(["-I", ".", "--include_source_info", f"--descriptor_set_out={out}", str(PROTO)])
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return files.file[0]


def write_protobuf_modules(out: Path) -> None:
    """The modules of ``sessionstore_client/_proto/`` under OUT, with their stubs.

    session_store_pb2 is compiled from the API's .proto; rpc_status_pb2 from the
    client's own rpc_status.proto, copied under OUT first when it is not there.
    """
    generated = out / "sessionstore_client" / "_proto"
    generated.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _protoc(["-I", ".", f"--python_out={tmp}", f"--mypy_out={tmp}", str(PROTO)])
        for suffix in (".py", ".pyi"):
            source = Path(tmp) / PROTO.with_name(PROTO.stem + "_pb2" + suffix)
            shutil.copyfile(source, generated / source.name)
    if not (out / STATUS_PROTO).exists():
        shutil.copyfile(CLIENT_SRC / STATUS_PROTO, out / STATUS_PROTO)
    _protoc(["-I", str(out), f"--python_out={out}", f"--mypy_out={out}", str(out / STATUS_PROTO)])


def _protoc(arguments: list[str]) -> None:
    # The mypy plugin (protoc-gen-mypy) is a script beside this interpreter.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = [sys.executable, "-m", "grpc_tools.protoc", *arguments]
    subprocess.run(command, check=True, env={**os.environ, "PATH": path})
