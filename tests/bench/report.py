"""Results: what was measured, against which target, and how it is shown.

Every figure is the median of repeated runs; the per-run figures and the raw
samples (latencies, counts) are kept for the JSON so a reader can recheck a
median or a percentile. Comparisons are ratios of two figures from the same
run, never against a number remembered from elsewhere.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# Where partial runs write, so they never replace a full run's results.
PARTIAL_DIR = RESULTS_DIR / "partial"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank: a value that was actually seen."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


@dataclass(frozen=True)
class Target:
    """A bound on a figure: ``op`` is ">=", "<" or "<="; ``on`` says which figure."""

    op: str
    limit: float
    text: str
    # "value" judges the figure itself; "ratio" judges the same-run ratio.
    on: str = "value"

    def met(self, figure: float) -> bool:
        if math.isnan(figure):
            return False
        if self.op == ">=":
            return figure >= self.limit
        if self.op == "<=":
            return figure <= self.limit
        return figure < self.limit


@dataclass
class Result:
    group: str
    backend: str
    metric: str
    value: float
    unit: str
    # Per-run figures whose median is ``value``.
    runs: Sequence[float] = field(default_factory=list)
    target: Target | None = None
    # A same-run comparison, e.g. ours / raw, and what it compares with.
    ratio: float | None = None
    ratio_of: str = ""
    note: str = ""

    @property
    def status(self) -> str:
        if self.target is None:
            return ""
        figure = self.ratio if self.target.on == "ratio" else self.value
        return "PASS" if figure is not None and self.target.met(figure) else "SHORT"

    def ratio_text(self) -> str:
        if self.ratio is not None:
            # Three decimals near 1, so that a SHORT never reads as the target itself.
            digits = 3 if self.ratio < 10 else 1
            return f"{self.ratio:.{digits}f}x {self.ratio_of}".rstrip()
        if (
            self.target is not None
            and self.target.on == "value"
            and self.value
            and self.target.limit
        ):
            # How far the figure is from an absolute limit: >1 is over a "<" limit.
            return f"{self.value / self.target.limit:.2f}x limit"
        return ""


class Report:
    """Collects results and raw samples for one run of the suite."""

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.raw: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}

    def add(self, result: Result) -> Result:
        self.results.append(result)
        print(f"  {_row(result)}", flush=True)
        return result

    def keep(self, key: str, samples: Any) -> None:
        """Raw samples for the JSON (and the plot), under a dotted key."""
        self.raw[key] = samples

    def find(self, group: str, backend: str, metric: str) -> Result | None:
        for r in self.results:
            if (r.group, r.backend, r.metric) == (group, backend, metric):
                return r
        return None

    # -- output ---------------------------------------------------------------------

    def table(self) -> str:
        header = ("group", "backend", "metric", "value", "unit", "target", "status", "ratio")
        rows = [header] + [_cells(r) for r in self.results]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = []
        for n, row in enumerate(rows):
            lines.append(
                "  ".join(
                    cell.rjust(widths[i]) if i == 3 else cell.ljust(widths[i])
                    for i, cell in enumerate(row)
                ).rstrip()
            )
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        results = []
        for r in self.results:
            data = asdict(r)
            data["status"] = r.status
            results.append(data)
        document = {"meta": self.meta, "results": results, "raw": self.raw}
        path.write_text(json.dumps(_clean(document), indent=1, allow_nan=False) + "\n")


def _clean(value: Any) -> Any:
    """JSON-safe: NaN (a figure that could not be measured) becomes null."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 6)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def _format(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _cells(r: Result) -> tuple[str, ...]:
    return (
        r.group,
        r.backend,
        r.metric,
        _format(r.value),
        r.unit,
        r.target.text if r.target else "",
        r.status,
        r.ratio_text(),
    )


def _row(r: Result) -> str:
    cells = _cells(r)
    return f"{cells[2]:<38} {cells[3]:>10} {cells[4]:<9} {cells[5]:<20} {cells[6]:<5} {cells[7]}"
