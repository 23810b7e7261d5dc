"""The whole durable log for the adapters, whose runtimes want every event at once.

GetDurableLog answers in pages of as many entries as fit in one message; a runtime
that shows a session's events from the first page alone would lose the latest ones.
"""

from __future__ import annotations

from sessionstore_client.aio import AsyncClient
from sessionstore_client.types import DurableLog


async def whole_durable_log(client: AsyncClient, session_id: str, version: int) -> DurableLog:
    """The durable log at ``version``, every page of it (each page token keeps the
    version of the first page)."""
    log = await client.get_durable_log(session_id, version=version)
    token = log.next_page_token
    while token:
        page = await client.get_durable_log(session_id, page_token=token)
        log.entries.extend(page.entries)
        token = page.next_page_token
    log.next_page_token = ""
    return log
