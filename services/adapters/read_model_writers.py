"""The read models' writers: how each applies an event to its tables.

Each writer runs inside a transaction the store opened (services.adapters.
read_model_store), which also moves the model's tracking position: the
writers know their tables and nothing of positions. ``forget`` deletes one
session's rows, so that a session can be projected again on its own.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, bindparam, delete, insert, update

from domain.session_events import EntriesErased, SessionErased
from projections.read_models import (
    CatalogChange,
    CompactionRow,
    PruneRow,
    catalog_changes,
    compaction_rows,
    prune_rows,
)
from services.adapters import read_model_tables as t

# What no database column can hold. Requests cannot bring it any more
# (domain.storable), but events stored by an earlier release may: such a value
# is projected with U+FFFD in its place, as on every database alike.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(values: dict[str, Any]) -> dict[str, Any]:
    """The row's values, with any character no column can hold replaced."""
    return {k: _UNSTORABLE.sub("\ufffd", v) if isinstance(v, str) else v for k, v in values.items()}


def micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


class ReadModel(ABC):
    """One read model: its name, the event topics it reads, its tables and its writer."""

    name: str
    topics: Sequence[str] = ()  # empty: every event
    tables: Sequence[Table] = ()
    # Whether it reads the entries' content (decrypted for it), not only their
    # structure and counts: its batches are then read apart from the others'.
    entry_content: bool = False

    @abstractmethod
    def write(self, connection: Connection, position: int, event: Any) -> None:
        """Applies one event to this model's tables, in the caller's transaction."""

    def forget(self, connection: Connection, session_id: str) -> None:
        """Deletes the session's rows, to project its events again."""
        for table in self.tables:
            connection.execute(delete(table).where(table.c.session_id == session_id))

    def write_batch(self, connection: Connection, batch: Sequence[tuple[int, Any]]) -> None:
        for position, event in batch:
            self.write(connection, position, event)


class Catalog(ReadModel):
    """The session catalog. A batch's changes to one session are merged into one
    UPDATE, and the UPDATEs of one shape sent together: under many writers most
    events are appends, and a statement per event would cost more than the rest."""

    name = "catalog"
    tables = t.MODEL_TABLES[name]

    def write(self, connection: Connection, position: int, event: Any) -> None:
        self.write_batch(connection, [(position, event)])

    def write_batch(self, connection: Connection, batch: Sequence[tuple[int, Any]]) -> None:
        pending: dict[str, tuple[int, CatalogChange]] = {}
        for position, event in batch:
            for change in catalog_changes(event):
                if change.insert:
                    _insert_session(connection, position, change)
                    continue
                earlier = pending.get(change.session_id)
                pending[change.session_id] = (
                    (position, _merged(earlier[1], change)) if earlier else (position, change)
                )
        shapes: dict[tuple[tuple[str, ...], tuple[str, ...]], list[dict[str, Any]]] = {}
        for position, change in pending.values():
            shape = (tuple(sorted(change.values)), tuple(sorted(change.increments)))
            shapes.setdefault(shape, []).append(
                {
                    "b_session_id": change.session_id,
                    "b_version": change.version,
                    "b_updated_us": micros(change.updated),
                    "b_updated_position": position,
                    **{f"b_{k}": v for k, v in storable(change.values).items()},
                    **{f"b_{k}": v for k, v in change.increments.items()},
                }
            )
            if change.labels is not None:
                _replace_labels(connection, change.session_id, change.labels)
        for (values, increments), params in shapes.items():
            c = t.catalog.c
            statement = (
                update(t.catalog)
                .where(c.session_id == bindparam("b_session_id"))
                .values(
                    version=bindparam("b_version"),
                    updated_us=bindparam("b_updated_us"),
                    updated_position=bindparam("b_updated_position"),
                    **{k: bindparam(f"b_{k}") for k in values},
                    **{k: c[k] + bindparam(f"b_{k}") for k in increments},
                )
            )
            connection.execute(statement, params)


def _merged(earlier: CatalogChange, later: CatalogChange) -> CatalogChange:
    increments = dict(earlier.increments)
    for key, amount in later.increments.items():
        increments[key] = increments.get(key, 0) + amount
    return CatalogChange(
        session_id=later.session_id,
        version=later.version,
        updated=later.updated,
        values={**earlier.values, **later.values},
        increments=increments,
        labels=later.labels if later.labels is not None else earlier.labels,
    )


def _insert_session(connection: Connection, position: int, change: CatalogChange) -> None:
    values = storable(change.values)
    values["created_us"] = micros(values.pop("created"))
    connection.execute(
        insert(t.catalog).values(
            session_id=change.session_id,
            created_position=position,
            entries=0,
            tokens=0,
            compactions=0,
            prunes=0,
            erased=0,
            version=change.version,
            updated_us=micros(change.updated),
            updated_position=position,
            **values,
        )
    )
    if change.labels is not None:
        _replace_labels(connection, change.session_id, change.labels)


def _replace_labels(connection: Connection, session_id: str, labels: dict[str, str]) -> None:
    connection.execute(delete(t.catalog_labels).where(t.catalog_labels.c.session_id == session_id))
    if labels:
        connection.execute(
            insert(t.catalog_labels),
            [storable({"session_id": session_id, "key": k, "value": v}) for k, v in labels.items()],
        )


class CompactionAudit(ReadModel):
    name = "compactions"
    tables = t.MODEL_TABLES[name]

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = topics

    def write(self, connection: Connection, position: int, event: Any) -> None:
        if isinstance(event, EntriesErased | SessionErased):
            _taint_compactions(connection, event)
            return
        rows: list[CompactionRow] = compaction_rows(event)
        for row in rows:
            values = storable(asdict(row))
            values["recorded_us"] = micros(values.pop("recorded_at"))
            connection.execute(insert(t.compactions).values(position=position, **values))


def _taint_compactions(connection: Connection, event: Any) -> None:
    """Clears what an erasure took from the audit's rows: the client's instructions of
    the compactions it tainted (all of the session's, erased whole), marked tainted."""
    c = t.compactions.c
    rows = c.session_id == event.originator_id
    if isinstance(event, EntriesErased):
        if not event.tainted_compactions:
            return
        rows = rows & c.version.in_(list(event.tainted_compactions))
    connection.execute(
        update(t.compactions).where(rows & (c.outcome == "ok")).values(outcome="tainted")
    )
    connection.execute(update(t.compactions).where(rows).values(instructions=""))


class PruneAudit(ReadModel):
    name = "prunes"
    tables = t.MODEL_TABLES[name]

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = topics

    def write(self, connection: Connection, position: int, event: Any) -> None:
        rows: list[PruneRow] = prune_rows(event)
        if rows:
            values = []
            for row in rows:
                value = storable(asdict(row))
                value["recorded_us"] = micros(value.pop("recorded_at"))
                values.append({"position": position, **value})
            connection.execute(insert(t.prunes), values)
