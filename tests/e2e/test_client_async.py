"""The asyncio client: the same methods awaited, the same errors, and a followed stream."""

from __future__ import annotations

import asyncio

import pytest
from sessionstore_client import AsyncClient, EntriesAppended, Entry, Role, TextBlock, errors

from services.grpc.server import RunningServer
from tests.support.cutting_proxy import cutting_proxy


def user(text: str) -> Entry:
    return Entry(role=Role.USER, content=[TextBlock(text)])


def test_appends_from_many_tasks_all_land_and_a_follower_sees_them(server: RunningServer) -> None:
    async def run() -> None:
        async with AsyncClient(f"127.0.0.1:{server.port}") as client:
            session = await client.create_session()
            seen: list[str] = []

            async def follow() -> None:
                async for event in client.read_events(session.id, follow=True):
                    if isinstance(event.event, EntriesAppended):
                        seen.extend(e.id for e in event.event.entries)
                        if len(seen) == 10:
                            return

            follower = asyncio.create_task(follow())
            answers = await asyncio.gather(
                *(client.append_entries(session.id, entries=[user(f"m{i}")]) for i in range(10))
            )
            await asyncio.wait_for(follower, 10)
            assert sorted(a.version for a in answers) == list(range(2, 12))
            assert sorted(seen) == sorted(i for a in answers for i in a.entry_ids)
            log = await client.get_durable_log(session.id)
            assert len(log.entries) == 10
            with pytest.raises(errors.VersionConflict):
                await client.append_entries(session.id, entries=[user("x")], expected_version=3)
            with pytest.raises(errors.NotFound):
                await client.get_prompt_view("missing")

    asyncio.run(run())


def test_one_client_serves_one_event_loop_after_another(server: RunningServer) -> None:
    client = AsyncClient(f"127.0.0.1:{server.port}", timeout=10)

    async def append(session_id: str, text: str) -> int:
        answer = await client.append_entries(session_id, entries=[user(text)])
        return answer.version

    # Each asyncio.run makes a loop and closes it on return: the client follows.
    session = asyncio.run(client.create_session())
    assert asyncio.run(append(session.id, "first")) == 2
    assert asyncio.run(append(session.id, "second")) == 3
    asyncio.run(client.close())


def test_a_followed_stream_resumes_after_its_last_event_when_the_connection_drops(
    server: RunningServer,
) -> None:
    async def run() -> None:
        async with (
            AsyncClient(f"127.0.0.1:{proxy.port}") as follower,
            AsyncClient(f"127.0.0.1:{server.port}") as writer,
        ):
            session = await writer.create_session()
            events = aiter(follower.read_events(session.id, follow=True, timeout=20))
            seen = [(await anext(events)).version]
            await writer.append_entries(session.id, entries=[user("before the drop")])
            seen.append((await anext(events)).version)
            proxy.cut_now()
            await writer.append_entries(session.id, entries=[user("after the drop")])
            seen.append((await anext(events)).version)
            assert seen == [1, 2, 3]
            assert proxy.cuts == 1

    with cutting_proxy(server.port) as proxy:
        asyncio.run(run())
