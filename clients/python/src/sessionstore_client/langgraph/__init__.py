"""A LangGraph checkpointer on the session store (extra ``[langgraph]``).

    from sessionstore_client.langgraph import SessionStoreSaver

    graph = builder.compile(checkpointer=SessionStoreSaver())
    graph.invoke(inputs, {"configurable": {"thread_id": "support-42"}}, durability="sync")

A thread is a session (its id the thread id); each checkpoint and each batch of
pending writes is an entry of it, ``checkpoint_ns`` kept in its keys (see
``_threads``). ``copy_thread`` forks the session, ``delete_thread`` erases it
(its id is then retired), ``delete_for_runs`` and ``prune`` erase the entries of
the checkpoints they drop. The messages of the root graph's ``messages`` channel
are kept as the session's conversation, so the store manages their context:
``prompt_messages(config)`` answers the prompt view (compacted, guarded, pruned)
for the model, in OpenAI's chat format. With ``durability="sync"`` each step's
messages are in the store before the next node runs.

The saver is put together from ``_core`` (its threads, and checkpoints as entries
and back), ``_sync`` and ``_async`` (its methods over each client) and
``_selection`` (the messages and entries a write or a delete picks).
"""

from __future__ import annotations

from sessionstore_client.langgraph._async import AsyncSaver
from sessionstore_client.langgraph._sync import SyncSaver

__all__ = ["SessionStoreSaver"]


class SessionStoreSaver(SyncSaver, AsyncSaver):
    """``BaseCheckpointSaver``, sync and async, over the session store. ``client`` is a
    ``Client`` or an ``AsyncClient`` (the other is made with its address, token and TLS);
    keyword ``settings`` are those of the sessions it creates."""
