"""What each RPC of the SessionStore service needs of its caller's role.

One table for every method: tests/unit/test_permissions.py fails when an RPC
of the proto is missing from it, and the authentication layer refuses a method it does
not list. Which sessions a call may touch is the use cases' business (a
tenant's own); this says only what kind of call it is.
"""

from __future__ import annotations

from services.app.tenancy import Permission

READ, WRITE = Permission.READ, Permission.WRITE

METHOD_PERMISSIONS: dict[str, Permission] = {
    "CreateSession": WRITE,
    "GetSession": READ,
    "ListSessions": READ,
    "UpdateSettings": WRITE,
    "AppendEntries": WRITE,
    "RecordCompaction": WRITE,
    "RecordPrune": WRITE,
    "UndoCompaction": WRITE,
    "GetDurableLog": READ,
    # The engine may compact while it assembles the view: the server's own
    # upkeep, as for any reader of the prompt.
    "GetPromptView": READ,
    "GetEntry": READ,
    # The recall index's embedding cache fills as searches need it: the server's upkeep.
    "Recall": READ,
    "ReadEvents": READ,
    "SetSystemPrompt": WRITE,
    # A dry run writes nothing, but the same call without it does.
    "Compact": WRITE,
    "ReportOverflow": WRITE,
    "GetContextReport": READ,
    "AbandonToolCalls": WRITE,
    "RetractEntry": WRITE,
    "ClearSession": WRITE,
    "ForkSession": WRITE,
    "ImportSession": WRITE,
    "ExportSession": READ,
    "ListCompactions": READ,
    "GetCompaction": READ,
    "ListPrunes": READ,
    "AuditView": READ,
    # A tenant may erase its own sessions: the data is its users'.
    "EraseSession": WRITE,
    "EraseEntries": WRITE,
    # Every tenant's quarantined events, named by session: the operator's view.
    "GetReadModelStatus": Permission.ADMIN,
}
