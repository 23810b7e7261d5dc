"""Python client of the sessionstore server: an event-sourced session store for LLM agents.

``Client`` (synchronous) and ``AsyncClient`` (asyncio) have one method per RPC,
taking and answering the dataclasses of ``sessionstore_client.types`` (all
re-exported here); failures raise the exceptions of ``sessionstore_client.errors``.
Adapters for agent runtimes are modules of their own, each an optional extra:
``.agents`` (OpenAI Agents SDK), ``.langgraph``, ``.adk`` (Google ADK) and
``.litellm``.
"""

from sessionstore_client import types
from sessionstore_client._transport import ROUND_ROBIN, TLS, Retry
from sessionstore_client.aio import AsyncClient
from sessionstore_client.client import Client
from sessionstore_client.types import *  # noqa: F403  (the API's messages, by name)

__all__ = ["ROUND_ROBIN", "TLS", "AsyncClient", "Client", "Retry"]
__all__ += types.__all__
