"""A loopback TCP proxy that can lose an answer: the request reaches the server, the
answer never reaches the client, and the connection is cut.

That is the failure retries with idempotency keys are for (the server did the
work; the client cannot know), made on the wire rather than inside either side.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

CHUNK = 65_536


class CuttingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._armed_for = 0.0
        self._lock = threading.Lock()
        self.cuts = 0
        self._closed = False
        self._links: list[_Link] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_next_answer(self, after_seconds: float = 0.5) -> None:
        """The next request is delivered; its answer is dropped, and the connection cut
        ``after_seconds`` later (time enough for the server to do the work)."""
        with self._lock:
            self._armed_for = after_seconds

    def cut_now(self) -> None:
        """Cuts every connection open now, as a network failure would: the client's
        calls and streams on them fail with UNAVAILABLE; new connections go through."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.cut()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            link = _Link(self, client, server)
            with self._lock:
                self._links.append(link)
            link.start()

    def _take_arming(self) -> float:
        with self._lock:
            armed, self._armed_for = self._armed_for, 0.0
            return armed


class _Link:
    """One proxied connection: a pump each way."""

    def __init__(self, proxy: CuttingProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.dropping = False

    def start(self) -> None:
        threading.Thread(target=self._upstream, daemon=True).start()
        threading.Thread(target=self._downstream, daemon=True).start()

    def _upstream(self) -> None:
        with suppress(OSError):  # the connection was closed: this pump ends
            for data in _received(self.client):
                armed = self.proxy._take_arming()
                if armed:
                    self.dropping = True
                    threading.Thread(target=self._cut, args=(armed,), daemon=True).start()
                self.server.sendall(data)

    def _downstream(self) -> None:
        with suppress(OSError):  # the connection was closed: this pump ends
            for data in _received(self.server):
                if not self.dropping:
                    self.client.sendall(data)

    def _cut(self, after: float) -> None:
        time.sleep(after)
        self.cut()

    def cut(self) -> None:
        self.proxy.cuts += 1
        for end in (self.client, self.server):
            _close(end)


def _received(end: socket.socket) -> Iterator[bytes]:
    try:
        while data := end.recv(CHUNK):
            yield data
    except OSError:
        return


def _close(end: socket.socket) -> None:
    with suppress(OSError):
        end.shutdown(socket.SHUT_RDWR)
    end.close()


@contextmanager
def cutting_proxy(target_port: int) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()
