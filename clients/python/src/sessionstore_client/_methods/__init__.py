# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""One method per RPC, for the synchronous client and for the asyncio one.

Each module here has the RPCs whose requests a section of the .proto declares
(the section's module of sessionstore_client._types); SyncMethods and
AsyncMethods gather them for sessionstore_client.client and .aio.
"""

from sessionstore_client._methods.abandon_fork_import_export import (
    AsyncAbandonForkImportExportMethods,
    SyncAbandonForkImportExportMethods,
)
from sessionstore_client._methods.audit import AsyncAuditMethods, SyncAuditMethods
from sessionstore_client._methods.audit_view import AsyncAuditViewMethods, SyncAuditViewMethods
from sessionstore_client._methods.commands import AsyncCommandsMethods, SyncCommandsMethods
from sessionstore_client._methods.context_management import (
    AsyncContextManagementMethods,
    SyncContextManagementMethods,
)
from sessionstore_client._methods.erasure import AsyncErasureMethods, SyncErasureMethods
from sessionstore_client._methods.events import AsyncEventsMethods, SyncEventsMethods
from sessionstore_client._methods.sessions import AsyncSessionsMethods, SyncSessionsMethods
from sessionstore_client._methods.views import AsyncViewsMethods, SyncViewsMethods

__all__ = ["AsyncMethods", "SyncMethods"]


class SyncMethods(
    SyncSessionsMethods,
    SyncCommandsMethods,
    SyncViewsMethods,
    SyncEventsMethods,
    SyncContextManagementMethods,
    SyncAbandonForkImportExportMethods,
    SyncAuditMethods,
    SyncAuditViewMethods,
    SyncErasureMethods,
):
    """The RPCs as methods of the synchronous client."""


class AsyncMethods(
    AsyncSessionsMethods,
    AsyncCommandsMethods,
    AsyncViewsMethods,
    AsyncEventsMethods,
    AsyncContextManagementMethods,
    AsyncAbandonForkImportExportMethods,
    AsyncAuditMethods,
    AsyncAuditViewMethods,
    AsyncErasureMethods,
):
    """The RPCs as methods of the asyncio client."""
