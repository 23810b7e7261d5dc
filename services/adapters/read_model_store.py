"""The read models' writes: rows and tracking position in one transaction.

A read model moves on in batches. Each batch's transaction locks the model's
tracking row, reads the position there, fetches the events after it, writes
their rows and the new position, and commits: every event is applied
exactly once, whoever runs the projection and however often it is stopped,
and a crash between an event and its rows loses nothing (the position did
not move either). Dropping a model's rows and position rebuilds it from zero.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, bindparam, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from domain.session import Session
from projections.read_models import (
    CatalogChange,
    CompactionRow,
    PruneRow,
    catalog_changes,
    compaction_rows,
    prune_rows,
)
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import ReadModelDatabase, reading

ERASURES = (Session.EntriesErased, Session.SessionErased)
# (notification id, decoded event) pairs after a position, and the position
# they bring the model to (beyond the last pair when later events were not
# the model's concern).
Fetch = Callable[[int, Sequence[str]], tuple[list[tuple[int, Any]], int]]


def micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


class ReadModel(ABC):
    """One read model: its name, the event topics it reads, its tables and its writer."""

    name: str
    topics: Sequence[str] = ()  # empty: every event
    tables: Sequence[Table] = ()

    @abstractmethod
    def write(self, connection: Connection, position: int, event: Any) -> None:
        """Applies one event to this model's tables, in the caller's transaction."""

    def write_batch(self, connection: Connection, batch: Sequence[tuple[int, Any]]) -> None:
        for position, event in batch:
            self.write(connection, position, event)


class Catalog(ReadModel):
    """The session catalog. A batch's changes to one session are merged into one
    UPDATE, and the UPDATEs of one shape sent together: under many writers most
    events are appends, and a statement per event would cost more than the rest."""

    name = "catalog"
    tables = (t.catalog_labels, t.catalog)

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
                    **{f"b_{k}": v for k, v in change.values.items()},
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
    values = dict(change.values)
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
            [{"session_id": session_id, "key": k, "value": v} for k, v in labels.items()],
        )


class CompactionAudit(ReadModel):
    name = "compactions"
    tables = (t.compactions,)

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = topics

    def write(self, connection: Connection, position: int, event: Any) -> None:
        if isinstance(event, Session.EntriesErased | Session.SessionErased):
            _taint_compactions(connection, event)
            return
        rows: list[CompactionRow] = compaction_rows(event)
        for row in rows:
            values = asdict(row)
            values["recorded_us"] = micros(values.pop("recorded_at"))
            connection.execute(insert(t.compactions).values(position=position, **values))


def _taint_compactions(connection: Connection, event: Any) -> None:
    """Clears what an erasure took from the audit's rows: the client's instructions of
    the compactions it tainted (all of the session's, erased whole), marked tainted."""
    c = t.compactions.c
    rows = c.session_id == event.originator_id
    if isinstance(event, Session.EntriesErased):
        if not event.tainted_compactions:
            return
        rows = rows & c.version.in_(list(event.tainted_compactions))
    connection.execute(
        update(t.compactions).where(rows & (c.outcome == "ok")).values(outcome="tainted")
    )
    connection.execute(update(t.compactions).where(rows).values(instructions=""))


class PruneAudit(ReadModel):
    name = "prunes"
    tables = (t.prunes,)

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = topics

    def write(self, connection: Connection, position: int, event: Any) -> None:
        rows: list[PruneRow] = prune_rows(event)
        if rows:
            values = []
            for row in rows:
                value = asdict(row)
                value["recorded_us"] = micros(value.pop("recorded_at"))
                values.append({"position": position, **value})
            connection.execute(insert(t.prunes), values)


class ReadModelStore:
    """Applies batches of events to read models and answers their positions."""

    def __init__(self, database: ReadModelDatabase, models: Sequence[ReadModel]) -> None:
        self.database = database
        self.models = {m.name: m for m in models}

    def model(self, name: str) -> ReadModel:
        try:
            return self.models[name]
        except KeyError:
            raise ValueError(
                f"no read model {name!r}; the read models are " + ", ".join(sorted(self.models))
            ) from None

    def catch_up(self, name: str, fetch: Fetch) -> tuple[int, int]:
        """Applies one batch to a model; answers (events applied, new position)."""
        model = self.model(name)
        with self.database.writer.begin() as connection:
            position = self._locked_positions(connection, [name])[name]
            batch, reached = fetch(position, model.topics)
            model.write_batch(connection, batch)
            _move_on(connection, {name: position}, reached)
        self._wipe_after_erasures(batch)
        return len(batch), max(reached, position)

    def catch_up_all(self, fetch: Fetch) -> tuple[int, int]:
        """Applies one batch to every model in one transaction: one read of the
        events serves all. A model behind the others (being rebuilt) gets the
        events after its own position only. Answers (events read, new position)."""
        with self.database.writer.begin() as connection:
            positions = self._locked_positions(connection, sorted(self.models))
            start = min(positions.values())
            batch, reached = fetch(start, ())
            for name, model in self.models.items():
                model.write_batch(connection, [p for p in batch if p[0] > positions[name]])
            _move_on(connection, positions, reached)
        self._wipe_after_erasures(batch)
        return len(batch), max(reached, start)

    def _wipe_after_erasures(self, batch: Sequence[tuple[int, Any]]) -> None:
        """On SQLite, once a batch with erasures is applied (a title cleared from the
        catalog), empties the write-ahead log into the file, as the event store does
        for its keys: the cleared rows' old bytes leave the file (the writer's
        connections overwrite what they delete: secure_delete)."""
        if self.database.postgres or not any(isinstance(e, ERASURES) for _, e in batch):
            return
        with self.database.writer.connect() as connection:
            driver: Any = connection.connection.driver_connection
            driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def position(self, name: str) -> int:
        with reading(self.database.reader) as connection:
            found = connection.execute(
                select(t.tracking.c.position).where(t.tracking.c.name == name)
            ).scalar()
            return int(found or 0)

    def positions(self) -> dict[str, int]:
        return {name: self.position(name) for name in self.models}

    def reset(self, name: str) -> None:
        """Drops a model's rows and position, in one transaction, to rebuild it from zero."""
        model = self.model(name)
        with self.database.writer.begin() as connection:
            self._locked_positions(connection, [name])
            for table in model.tables:
                connection.execute(delete(table))
            connection.execute(
                update(t.tracking).where(t.tracking.c.name == name).values(position=0)
            )

    def _locked_positions(self, connection: Connection, names: Sequence[str]) -> dict[str, int]:
        """The models' positions, their rows locked (in name order, so that two
        projectors never wait on each other in a cycle) until the transaction ends.
        A model's first batch makes its row."""
        query = (
            select(t.tracking.c.name, t.tracking.c.position)
            .where(t.tracking.c.name.in_(names))
            .order_by(t.tracking.c.name)
        )
        if self.database.postgres:
            query = query.with_for_update()
        positions = {row.name: int(row.position) for row in connection.execute(query)}
        if len(positions) == len(names):
            return positions
        dialect: Any = postgresql if self.database.postgres else sqlite
        connection.execute(
            dialect.insert(t.tracking)
            .values([{"name": name, "position": 0} for name in names])
            .on_conflict_do_nothing()
        )
        return {row.name: int(row.position) for row in connection.execute(query)}


def _move_on(connection: Connection, positions: dict[str, int], reached: int) -> None:
    """The models' new position, in one statement (the batch's transaction)."""
    behind = [name for name, position in positions.items() if reached > position]
    if behind:
        connection.execute(
            update(t.tracking).where(t.tracking.c.name.in_(behind)).values(position=reached)
        )
