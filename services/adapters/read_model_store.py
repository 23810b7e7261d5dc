"""The read models' writes: rows and tracking position in one transaction.

A read model moves on in batches. Each batch's transaction locks the model's
tracking row, reads the position there, fetches the events after it, writes
their rows and the new position, and commits: every event is applied
exactly once, whoever runs the projection and however often it is stopped,
and a crash between an event and its rows loses nothing (the position did
not move either). Dropping a model's rows and position rebuilds it from zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from projections.read_models import (
    CatalogChange,
    CompactionRow,
    PruneRow,
    catalog_changes,
    compaction_rows,
    prune_rows,
)
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import ReadModelDatabase

# (notification id, decoded event) pairs after a position, and the position
# they bring the model to (beyond the last pair when later events were not
# the model's concern).
Fetch = Callable[[int, Sequence[str]], tuple[list[tuple[int, Any]], int]]


def micros(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


class ReadModel:
    """One read model: its name, the event topics it reads, its tables and its writer."""

    name: str
    topics: Sequence[str] = ()  # empty: every event
    tables: Sequence[Table] = ()

    def write(self, connection: Connection, position: int, event: Any) -> None:
        raise NotImplementedError


class Catalog(ReadModel):
    name = "catalog"
    tables = (t.catalog_labels, t.catalog)

    def write(self, connection: Connection, position: int, event: Any) -> None:
        for change in catalog_changes(event):
            _write_catalog(connection, position, change)


def _write_catalog(connection: Connection, position: int, change: CatalogChange) -> None:
    moved = {
        "version": change.version,
        "updated_us": micros(change.updated),
        "updated_position": position,
    }
    if change.insert:
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
                **values,
                **moved,
            )
        )
    else:
        raised = {name: t.catalog.c[name] + amount for name, amount in change.increments.items()}
        connection.execute(
            update(t.catalog)
            .where(t.catalog.c.session_id == change.session_id)
            .values(**moved, **change.values, **raised)
        )
    if change.labels is not None:
        connection.execute(
            delete(t.catalog_labels).where(t.catalog_labels.c.session_id == change.session_id)
        )
        if change.labels:
            connection.execute(
                insert(t.catalog_labels),
                [
                    {"session_id": change.session_id, "key": k, "value": v}
                    for k, v in change.labels.items()
                ],
            )


class CompactionAudit(ReadModel):
    name = "compactions"
    tables = (t.compactions,)

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = topics

    def write(self, connection: Connection, position: int, event: Any) -> None:
        rows: list[CompactionRow] = compaction_rows(event)
        for row in rows:
            values = asdict(row)
            values["recorded_us"] = micros(values.pop("recorded_at"))
            connection.execute(insert(t.compactions).values(position=position, **values))


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
            position = self._locked_position(connection, name)
            batch, reached = fetch(position, model.topics)
            for notification_id, event in batch:
                model.write(connection, notification_id, event)
            if reached > position:
                connection.execute(
                    update(t.tracking).where(t.tracking.c.name == name).values(position=reached)
                )
            return len(batch), max(reached, position)

    def position(self, name: str) -> int:
        with self.database.reader.connect() as connection:
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
            self._locked_position(connection, name)
            for table in model.tables:
                connection.execute(delete(table))
            connection.execute(
                update(t.tracking).where(t.tracking.c.name == name).values(position=0)
            )

    def _locked_position(self, connection: Connection, name: str) -> int:
        dialect: Any = postgresql if self.database.postgres else sqlite
        connection.execute(
            dialect.insert(t.tracking).values(name=name, position=0).on_conflict_do_nothing()
        )
        query = select(t.tracking.c.position).where(t.tracking.c.name == name)
        if self.database.postgres:
            query = query.with_for_update()
        return int(connection.execute(query).scalar_one())
