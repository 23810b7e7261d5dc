"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against the
saver on a running store, SQLite and PostgreSQL: every base capability and every
extended one the saver claims (copy_thread, delete_for_runs, prune). The report is
printed to the terminal, whatever pytest captures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from sessionstore_client import AsyncClient
from sessionstore_client.langgraph import SessionStoreSaver

from services.grpc.server import RunningServer


def test_the_saver_passes_langgraphs_conformance_suite(
    server: RunningServer, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{server.port}"

    @checkpointer_test(name=f"SessionStoreSaver ({database_url.split(':')[0]})")
    async def saver() -> AsyncGenerator[SessionStoreSaver, None]:
        yield SessionStoreSaver(AsyncClient(address))

    with capsys.disabled():
        print()
        report = asyncio.run(validate(saver, progress=ProgressCallbacks.verbose()))
        report.print_report()
    assert {c.value for c in ALL_CAPABILITIES} == {
        name for name, result in report.results.items() if result.detected
    }
    failed = {name: r.failures for name, r in report.results.items() if not r.passed}
    assert report.passed_all(), failed
