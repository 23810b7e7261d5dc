"""The events read models are moved on by: batches of the store's notifications after a
position, of the topics a model reads, decoded (an event that cannot be decoded
stands as an Unreadable, which the model quarantines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import Notification

from services.adapters.event_store import EventStore
from services.adapters.read_model_db import is_transient
from services.adapters.read_model_store import Batch, Unreadable, describe_error

BATCH = 500


class EventBatches:
    """Reads the store's events ``size`` at a time."""

    def __init__(self, events: EventStore, size: int = BATCH) -> None:
        self.events = events
        self.size = size

    def fetch(
        self, position: int, topics: Sequence[str], content: bool = False, head: int | None = None
    ) -> tuple[Batch, int]:
        """The next batch of events after ``position`` of the given topics, and the
        position it reaches (the store's head, when the batch is its last);
        ``content``: with the entries' content opened. ``head``: the store's head
        as the caller just read it (else it is read here): a bound that holds once
        read, every event up to it committed or never to be."""
        recorder = self.events.recorder
        if head is None:
            head = recorder.max_notification_id() or 0
        if head <= position:
            return [], position
        found = recorder.select_notifications(
            start=position,
            limit=self.size,
            stop=head,
            topics=topics,
            inclusive_of_start=False,
        )
        reached = found[-1].id if len(found) == self.size else head
        decoded = self.decoded(found, content)
        return list(zip([n.id for n in found], decoded, strict=True)), reached

    def decoded(self, found: Sequence[Notification], content: bool = False) -> list[Any]:
        """The events, their entries' content left sealed unless ``content`` (most
        read models count entries and tokens); one that cannot be decoded becomes
        an Unreadable."""
        try:
            return self.events.decode_notifications(found, entry_content=content)
        except Exception as error:
            if is_transient(error):
                raise
        decoded: list[Any] = []
        for notification in found:
            try:
                decoded += self.events.decode_notifications([notification], entry_content=content)
            except Exception as error:
                if is_transient(error):
                    raise
                decoded.append(
                    Unreadable(
                        str(notification.originator_id),
                        notification.topic,
                        describe_error(error),
                    )
                )
        return decoded
