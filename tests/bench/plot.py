"""The results as one PNG: four panels drawn from the raw samples in the report.

(a) append rate against session length, (b) prompt view p50 against session
length, warm and cold, (c) append rate and latency against client count with
the raw insert rate, (d) the store against its peers. A panel whose group did
not run says so instead of being left out, so the layout never changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.bench.report import Report, median

COLOURS = {"postgres": "tab:blue", "sqlite": "tab:orange"}


def write_png(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display; and keep the import out of the other modules
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    _length(axes[0][0], report.raw)
    _views(axes[0][1], report.raw)
    _clients(axes[1][0], report.raw)
    _peers(axes[1][1], report.raw)
    scale = report.meta.get("scale", "?")
    machine = report.meta.get("machine", {}).get("summary", "")
    fig.suptitle(f"sessionstore bench ({scale}): {machine}", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _empty(ax: Any, title: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)


def _by_backend(raw: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {
        k.split(".")[1]: v for k, v in raw.items() if k.startswith(prefix) and k.count(".") == 1
    }


def _length(ax: Any, raw: dict[str, Any]) -> None:
    title = "(a) one-turn append rate vs session length"
    data = _by_backend(raw, "length.")
    if not data:
        return _empty(ax, title)
    for backend, d in data.items():
        points = d["points"]
        ax.plot(
            points,
            [median(d["appends_per_s"][str(p)]) for p in points],
            marker="o",
            color=COLOURS.get(backend),
            label=backend,
        )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set(title=title, xlabel="entries in session", ylabel="appends/s (median of runs)")
    ax.legend()
    ax.grid(alpha=0.3)
    return None


def _views(ax: Any, raw: dict[str, Any]) -> None:
    title = "(b) prompt view p50 vs session length"
    data = _by_backend(raw, "view.")
    if not data:
        return _empty(ax, title)
    for backend, d in data.items():
        sizes = sorted(int(k) for k in d if k.isdigit())
        colour = COLOURS.get(backend)
        ax.plot(
            sizes,
            [median(d[str(s)]["warm_p50_ms"]) for s in sizes],
            marker="o",
            color=colour,
            label=f"{backend} warm p50",
        )
        ax.plot(
            sizes,
            [median(d[str(s)]["cold_ms"]) for s in sizes],
            marker="s",
            linestyle="--",
            color=colour,
            label=f"{backend} cold (first view, fresh server)",
        )
    ax.axhline(5, color="grey", linestyle=":", linewidth=1)
    ax.axhline(100, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(title=title, xlabel="entries in session", ylabel="ms (targets at 10k: 5, 100)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return None


def _clients(ax: Any, raw: dict[str, Any]) -> None:
    title = "(c) append rate and p50 latency vs client count"
    cases = {k: v for k, v in raw.items() if k.startswith("ingest.") and isinstance(v, dict)}
    if not cases:
        return _empty(ax, title)
    latency_ax = ax.twinx()
    for backend in sorted({k.split(".")[1] for k in cases}):
        colour = COLOURS.get(backend)
        mine = [v for k, v in cases.items() if k.split(".")[1] == backend]
        for shared, style in ((False, "-"), (True, "--")):
            series = sorted(
                (v for v in mine if v["shared"] == shared and v["entries_per_append"] == 1),
                key=lambda v: v["clients"],
            )
            if shared:
                # The 1-client case is the same for both: draw shared from it.
                series = [
                    v
                    for v in mine
                    if v["clients"] == 1 and not v["shared"] and v["entries_per_append"] == 1
                ] + series
            if not series:
                continue
            clients = [v["clients"] for v in series]
            ax.plot(
                clients,
                [median(v["appends_per_s"]) for v in series],
                marker="o",
                linestyle=style,
                color=colour,
                label=f"{backend} {'one shared session' if shared else 'own sessions'}",
            )
            if not shared:
                latency_ax.plot(
                    clients,
                    [median(v["p50_ms"]) for v in series],
                    marker="x",
                    linestyle=":",
                    color=colour,
                    alpha=0.6,
                )
        raw_rate = raw.get(f"ingest.{backend}.raw_rows_per_s")
        if raw_rate:
            ax.axhline(
                median(raw_rate),
                color=colour,
                linestyle="-.",
                linewidth=1,
                label=f"{backend} raw insert, 1 client",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    clients_seen = sorted({v["clients"] for v in cases.values()})
    ax.set_xticks(clients_seen, [str(c) for c in clients_seen])
    # Head room above the raw lines for the legend.
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top * 4)
    ax.set(title=title, xlabel="concurrent clients", ylabel="appends/s (log)")
    latency_ax.plot([], [], marker="x", linestyle=":", color="grey", label="p50 latency (right)")
    latency_ax.set_ylabel("p50 append latency, own sessions (ms)")
    latency_ax.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = latency_ax.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, fontsize=7, loc="upper left", ncol=2)
    ax.grid(alpha=0.3)
    return None


def _peers(ax: Any, raw: dict[str, Any]) -> None:
    title = "(d) the store vs peers, same turns, same PostgreSQL"
    data = raw.get("peers")
    if not data:
        return _empty(ax, title)
    names = list(data["turns_per_s"])
    rates = [median(data["turns_per_s"][n]) for n in names]
    bars = ax.bar(range(len(names)), rates, color=["tab:green", "tab:grey", "tab:grey"])
    ax.bar_label(bars, fmt="%.0f")
    ax.set_xticks(range(len(names)), [n.replace(" ", "\n", 1) for n in names], fontsize=8)
    ax.set(
        title=title,
        ylabel=f"turns/s at {data['conversation_turns']:,} turns (write + read back)",
    )
    ax.grid(alpha=0.3, axis="y")
    return None
