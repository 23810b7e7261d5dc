"""The store's Prometheus metrics, in a registry of the server's own.

The gRPC figures carry the names of the go-grpc-prometheus family
(``grpc_server_handled_total``, ``grpc_server_handling_seconds``), which
dashboards and alerts for gRPC services already use; the store's own are
``sessionstore_*``. Counters are fed as things happen (calls, saved events,
summariser calls); gauges of state (read models, caches, the connection
pool) are read when Prometheus scrapes (services.observability.collector).
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    start_http_server,
)

# Call latency: from a cached view (a millisecond) to a compaction's summary (minutes).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SUMMARIZER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
TOKEN_BUCKETS = (1_000, 4_000, 16_000, 32_000, 64_000, 128_000, 200_000, 500_000, 1_000_000)
# Provider tokens per estimated token; 1 means the estimate was right.
RATIO_BUCKETS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 3, 4)


class Endpoint:
    """A registry of one process's metrics, and its /metrics listener."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def include_process(self) -> None:
        """The Python client's process, platform and collector figures."""
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)

    def serve(self, address: str) -> int:
        """Serves /metrics on ``address`` (host:port; port 0 picks one) and answers the port."""
        host, _, port = address.rpartition(":")
        try:
            server, thread = start_http_server(
                int(port), addr=host.strip("[]"), registry=self.registry
            )
        except OSError as error:
            raise OSError(f"cannot serve metrics on {address}: {error.strerror or error}") from None
        self._server, self._thread = server, thread
        return int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class Metrics(Endpoint):
    """Every metric the server feeds, registered in ``registry``."""

    def __init__(self) -> None:
        super().__init__()
        r = self.registry
        call = ["grpc_type", "grpc_service", "grpc_method"]
        self.started = Counter(
            "grpc_server_started_total", "RPCs started on the server.", call, registry=r
        )
        self.handled = Counter(
            "grpc_server_handled_total",
            "RPCs completed on the server, by status code.",
            [*call, "grpc_code"],
            registry=r,
        )
        self.handling = Histogram(
            "grpc_server_handling_seconds",
            "Time from the start of an RPC to its status, in seconds.",
            call,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.appends = Counter(
            "sessionstore_appends_total", "Appends saved (one per request).", registry=r
        )
        self.entries = Counter(
            "sessionstore_entries_appended_total", "Entries saved, by role.", ["role"], registry=r
        )
        self.entry_bytes = Counter(
            "sessionstore_entry_bytes_total", "Text bytes of the entries saved.", registry=r
        )
        self.entry_tokens = Counter(
            "sessionstore_entry_tokens_total",
            "Tokens counted at ingest for the entries saved, by tokenizer.",
            ["tokenizer"],
            registry=r,
        )
        self.compactions = Counter(
            "sessionstore_compactions_total",
            "Compactions recorded or failed, by trigger, outcome and fallback stage "
            "(for a failure: the stage it failed at).",
            ["trigger", "outcome", "stage"],
            registry=r,
        )
        self.compaction_tokens_before = Histogram(
            "sessionstore_compaction_tokens_before",
            "The prompt's tokens before a compaction.",
            ["trigger"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.compaction_tokens_after = Histogram(
            "sessionstore_compaction_tokens_after",
            "The prompt's tokens after a compaction.",
            ["trigger"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.summarizer_seconds = Histogram(
            "sessionstore_summarizer_seconds",
            "Summariser calls' duration, by model and outcome (ok or error).",
            ["model", "outcome"],
            buckets=SUMMARIZER_BUCKETS,
            registry=r,
        )
        self.summarizer_errors = Counter(
            "sessionstore_summarizer_errors_total",
            "Summariser calls that failed, by model and kind (overflow, unavailable, error).",
            ["model", "kind"],
            registry=r,
        )
        self.prunes = Counter("sessionstore_prunes_total", "Prunes recorded.", registry=r)
        self.pruned_entries = Counter(
            "sessionstore_pruned_entries_total",
            "Tool results the recorded prunes trim or clear, by action.",
            ["action"],
            registry=r,
        )
        self.prune_chars_saved = Counter(
            "sessionstore_prune_chars_saved_total",
            "Characters of tool output the recorded prunes leave out of the prompt view "
            "(pruning's policy is in characters: window x 4).",
            registry=r,
        )
        self.tool_result_guard = Counter(
            "sessionstore_tool_result_guard_total",
            "Tool results the tool-result guard did not keep whole, by action.",
            ["action"],
            registry=r,
        )
        self.window_guard = Counter(
            "sessionstore_window_guard_total",
            "The context window guard's verdicts on prompt views served, by level.",
            ["level"],
            registry=r,
        )
        self.calibration = Histogram(
            "sessionstore_calibration_ratio",
            "Provider tokens per estimated token, as each provider report taught, by model.",
            ["model"],
            buckets=RATIO_BUCKETS,
            registry=r,
        )
        self.views = Counter(
            "sessionstore_prompt_views_total",
            "Prompt views served, whole or as a delta on the view the client holds.",
            ["kind"],
            registry=r,
        )
