"""A real Prometheus for the metrics tests: promtool to check what the server serves,
and a Prometheus server, on a free loopback port, that scrapes it.

Both come from Debian's ``prometheus`` package, which .ci/ensure-prometheus
installs when it is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.pg_cluster import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRAPE_SECONDS = 1


def ensure_installed() -> None:
    if shutil.which("prometheus") and shutil.which("promtool"):
        return
    subprocess.run(["bash", str(REPO_ROOT / ".ci" / "ensure-prometheus")], check=True)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def promtool_check(exposition: str) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics``: the format, and the naming and help conventions."""
    return subprocess.run(
        ["promtool", "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
    )


def samples(exposition: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample, by name and labels."""
    found = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(exposition: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0: none)."""
    wanted = set(labels.items())
    return sum(
        figure
        for (sample, sample_labels), figure in samples(exposition).items()
        if sample == name and wanted <= sample_labels
    )


class PrometheusServer:
    """``prometheus`` scraping one target every second, its data in a temporary folder."""

    def __init__(self, target_port: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="prometheus-"))
        self.port = free_port()
        config = self.folder / "prometheus.yml"
        config.write_text(
            "global:\n"
            f"  scrape_interval: {SCRAPE_SECONDS}s\n"
            f"  scrape_timeout: {SCRAPE_SECONDS}s\n"
            "scrape_configs:\n"
            "  - job_name: sessionstore\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n"
        )
        self._log = (self.folder / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def query(self, expression: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expression}
        )
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def scalar(self, expression: str) -> float | None:
        """The expression's one value now, or None while it has none."""
        try:
            result = self.query(expression)
        except OSError:
            return None  # not listening yet
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def wait_for(self, expression: str, expected: float, within: float = 30) -> None:
        """Waits until Prometheus, by its own scrapes, holds ``expected`` for the expression."""
        end = time.monotonic() + within
        seen = None
        while time.monotonic() < end:
            assert self.process.poll() is None, self.log()
            seen = self.scalar(expression)
            if seen == expected:
                return
            time.sleep(0.2)
        raise AssertionError(f"{expression}: Prometheus holds {seen}, not {expected}")

    def log(self) -> str:
        return (self.folder / "prometheus.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
        shutil.rmtree(self.folder, ignore_errors=True)
