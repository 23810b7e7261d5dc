"""The read models' writes: rows and tracking position in one transaction, per model.

A read model moves on in batches, each model on its own. A batch's
transaction locks the model's tracking row, reads the position there, writes
the rows of the events after it and the new position, and commits: every
event is applied exactly once, whoever runs the projection and however often
it is stopped, and a crash between an event and its rows loses nothing (the
position did not move either). Dropping a model's rows and position rebuilds
it from zero.

An event a model cannot apply (``Unreadable``, or one its writer fails on
for a reason other than the database being unreachable) does not stop it:
the batch is applied again event by event, each in a savepoint, and the
events that fail are quarantined (a row of their own: model, position,
error, time) while the model moves past them. A database that cannot be
reached raises ``services.adapters.read_model_db.is_transient`` errors,
which the caller retries later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from eventsourcing.domain import get_topic
from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from domain.session_events import EntriesErased, SessionErased
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import ReadModelDatabase, is_transient, reading
from services.adapters.read_model_writers import ReadModel, storable

MAX_ERROR_CHARS = 2_000
# The runner's shared loop waits no longer than this for a lock another holds: a
# model that must wait longer is retried on a thread of its own, holding up none of
# the others (a lock held for long is a busy database, not another server's batch).
QUICK_LOCK_TIMEOUT_MS = 250
ERASURES = (EntriesErased, SessionErased)


@dataclass(frozen=True)
class Unreadable:
    """An event whose stored form could not be decoded: no model can apply it."""

    session_id: str
    topic: str
    error: str


# (notification id, decoded event or Unreadable) pairs after a position, and the
# position they bring the model to (beyond the last pair when later events
# were not the model's concern).
Batch = list[tuple[int, Any]]
Fetch = Callable[[int, Sequence[str]], tuple[Batch, int]]


@dataclass(frozen=True)
class Quarantined:
    model: str
    position: int
    session_id: str
    topic: str
    error: str
    recorded_us: int
    attempts: int


@dataclass(frozen=True)
class Applied:
    """What one batch did to one model."""

    events: int  # applied (quarantined ones included)
    position: int  # the model's position afterwards
    quarantined: tuple[Quarantined, ...] = ()
    # The model's position was not where the batch started (another projector,
    # or a rebuild, moved it): nothing was done.
    moved: bool = False


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
        start = self.positions([name])[name]
        batch, reached = fetch(start, self.model(name).topics)
        applied = self.apply(name, batch, start, reached)
        return applied.events, applied.position

    def apply_together(
        self, names: Sequence[str], batch: Batch, start: int, reached: int
    ) -> dict[str, Applied] | None:
        """The batch applied to several models at ``start`` in one transaction: what a
        healthy projection does, a transaction per batch rather than per model. None
        when that fails for any reason (nothing is written then): ``apply`` each model
        on its own, which tells the failures apart."""
        models = [self.model(name) for name in names]
        todo = {m.name: [(p, e) for p, e in batch if p > start and _reads(m, e)] for m in models}
        if any(isinstance(e, Unreadable) for events in todo.values() for _, e in events):
            return None
        try:
            with self._writing(quick=True) as connection:
                positions = self._locked_positions(connection, list(names))
                if any(position != start for position in positions.values()):
                    return None
                for model in models:
                    model.write_batch(connection, todo[model.name])
                if reached > start:
                    connection.execute(
                        update(t.tracking)
                        .where(t.tracking.c.name.in_(list(names)))
                        .values(position=reached)
                    )
        except Exception:
            return None
        self._wipe_after_erasures(batch)
        return {name: Applied(len(todo[name]), max(reached, start)) for name in names}

    def apply(
        self, name: str, batch: Batch, start: int, reached: int, *, quick: bool = False
    ) -> Applied:
        """Applies the batch fetched after ``start`` (and reaching ``reached``) to one
        model, quarantining what it cannot apply. ``quick``: give up at once on a lock
        another holds (a transient error), rather than wait for it."""
        model = self.model(name)
        try:
            return self._apply(model, batch, start, reached, one_by_one=False, quick=quick)
        except Exception as error:
            if is_transient(error):
                raise
        return self._apply(model, batch, start, reached, one_by_one=True, quick=quick)

    @contextmanager
    def _writing(self, *, quick: bool) -> Iterator[Connection]:
        """The writer's transaction; ``quick``: one that waits for no lock held elsewhere
        for more than a moment (PostgreSQL; SQLite's writer waits for its busy timeout)."""
        with self.database.writer.begin() as connection:
            if quick and self.database.postgres:
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = {QUICK_LOCK_TIMEOUT_MS}")
            yield connection

    def _apply(
        self,
        model: ReadModel,
        batch: Batch,
        start: int,
        reached: int,
        *,
        one_by_one: bool,
        quick: bool,
    ) -> Applied:
        with self._writing(quick=quick) as connection:
            position = self._locked_positions(connection, [model.name])[model.name]
            if position < start:
                return Applied(0, position, moved=True)
            # A batch read for several models holds events of other models' topics.
            todo = [(p, e) for p, e in batch if p > position and _reads(model, e)]
            unreadable = [(p, e) for p, e in todo if isinstance(e, Unreadable)]
            readable = [(p, e) for p, e in todo if not isinstance(e, Unreadable)]
            failed = [(p, e, e.error) for p, e in unreadable]
            if one_by_one:
                failed += _write_one_by_one(connection, model, readable)
            else:
                model.write_batch(connection, readable)
            quarantined = tuple(self._quarantine(connection, model.name, failed))
            if reached > position:
                connection.execute(
                    update(t.tracking)
                    .where(t.tracking.c.name == model.name)
                    .values(position=reached)
                )
        self._wipe_after_erasures(readable)
        return Applied(len(todo), max(reached, position), quarantined)

    def _quarantine(
        self,
        connection: Connection,
        name: str,
        failed: list[tuple[int, Any, str]],
        earlier: dict[int, int] | None = None,
    ) -> list[Quarantined]:
        """Quarantine rows for the failed events; ``earlier``: attempts made before, by
        position."""
        rows = [
            Quarantined(
                model=name,
                position=position,
                session_id=_session_of(event),
                topic=_topic_of(event),
                error=error[:MAX_ERROR_CHARS],
                recorded_us=int(time.time() * 1_000_000),
                attempts=(earlier or {}).get(position, 0) + 1,
            )
            for position, event, error in failed
        ]
        if rows:
            # An error may quote the very value no column could hold.
            connection.execute(insert(t.quarantine), [storable(asdict(row)) for row in rows])
        return rows

    def reproject(self, name: str, session_id: str, events: Batch) -> list[Quarantined]:
        """Projects one session again in one model: its rows dropped, then every event
        of it the model has passed (``events``, in order) applied again, each in a
        savepoint. Its quarantined events that apply now leave the quarantine; those
        that still fail stay, their error and attempts updated. Answers those."""
        model = self.model(name)
        q = t.quarantine.c
        with self.database.writer.begin() as connection:
            position = self._locked_positions(connection, [name])[name]
            mine = and_(q.model == name, q.session_id == session_id)
            earlier = {
                row.position: row.attempts
                for row in connection.execute(select(q.position, q.attempts).where(mine))
            }
            connection.execute(delete(t.quarantine).where(mine))
            model.forget(connection, session_id)
            passed = [(p, e) for p, e in events if p <= position and _reads(model, e)]
            failed = [(p, e, e.error) for p, e in passed if isinstance(e, Unreadable)]
            readable = [(p, e) for p, e in passed if not isinstance(e, Unreadable)]
            failed += _write_one_by_one(connection, model, readable)
            rows = self._quarantine(connection, name, failed, earlier)
        self._wipe_after_erasures(readable)
        return rows

    def quarantined(self, names: Sequence[str] | None = None) -> list[Quarantined]:
        """The quarantined events, of the given models (all when None), by model and position."""
        q = t.quarantine.c
        query = select(t.quarantine).order_by(q.model, q.position)
        if names is not None:
            query = query.where(q.model.in_(list(names)))
        with reading(self.database.reader) as connection:
            return [Quarantined(**row) for row in connection.execute(query).mappings()]

    def quarantine_counts(self) -> dict[str, int]:
        q = t.quarantine.c
        with reading(self.database.reader) as connection:
            rows = connection.execute(select(q.model, func.count()).group_by(q.model))
            return {model: int(count) for model, count in rows}

    def first_quarantined(self, names: Sequence[str], after: int, upto: int) -> Quarantined | None:
        """The first event of these models quarantined in the positions (after, upto]."""
        q = t.quarantine.c
        query = (
            select(t.quarantine)
            .where(q.model.in_(list(names)), q.position > after, q.position <= upto)
            .order_by(q.position)
            .limit(1)
        )
        with reading(self.database.reader) as connection:
            row = connection.execute(query).mappings().first()
        return None if row is None else Quarantined(**row)

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
        return self.positions([name])[name]

    def positions(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """The models' positions (0 for a model that never applied a batch), in one query."""
        wanted = list(self.models) if names is None else list(names)
        tracking = t.tracking.c
        query = select(tracking.name, tracking.position).where(tracking.name.in_(wanted))
        with reading(self.database.reader) as connection:
            found = {row.name: int(row.position) for row in connection.execute(query)}
        return {name: found.get(name, 0) for name in wanted}

    def reset(self, name: str) -> None:
        """Drops a model's rows, quarantine and position, in one transaction, to rebuild
        it from zero."""
        model = self.model(name)
        with self.database.writer.begin() as connection:
            self._locked_positions(connection, [name])
            for table in model.tables:
                connection.execute(delete(table))
            connection.execute(delete(t.quarantine).where(t.quarantine.c.model == name))
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


def _write_one_by_one(
    connection: Connection, model: ReadModel, batch: Batch
) -> list[tuple[int, Any, str]]:
    """Writes each event in a savepoint of its own; answers those that failed, with why.
    A database that cannot be reached fails the whole transaction instead."""
    failed = []
    for position, event in batch:
        try:
            with connection.begin_nested():
                model.write(connection, position, event)
        except Exception as error:
            if is_transient(error):
                raise
            failed.append((position, event, describe_error(error)))
    return failed


def describe_error(error: BaseException) -> str:
    """The error's type and first line, the driver's own where SQLAlchemy wrapped it."""
    orig = getattr(error, "orig", None)  # SQLAlchemy's wrapper: the driver's own error
    cause = orig if isinstance(orig, Exception) else error
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"


def _reads(model: ReadModel, event: Any) -> bool:
    return not model.topics or _topic_of(event) in model.topics


def _session_of(event: Any) -> str:
    return event.session_id if isinstance(event, Unreadable) else str(event.originator_id)


def _topic_of(event: Any) -> str:
    return event.topic if isinstance(event, Unreadable) else get_topic(type(event))
