"""Cross-session read models: what each event changes in the SQL tables.

The functions here are pure folds of one event into row changes; the tables,
transactions and tracking positions live in services.adapters.read_model_store,
so the same logic serves a live follower and a rebuild from zero.
"""

from projections.read_models.audit import compaction_rows, prune_rows
from projections.read_models.catalog import catalog_changes
from projections.read_models.rows import CatalogChange, CompactionRow, PruneRow

__all__ = [
    "CatalogChange",
    "CompactionRow",
    "PruneRow",
    "catalog_changes",
    "compaction_rows",
    "prune_rows",
]
