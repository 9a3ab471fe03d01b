"""query_metrics without a service ranks the whole environment, at a cost that does not
grow with the number of services (one pass over the files, one Prometheus query)."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from diagnosis.evidence.common import Deadline, QueryWindow
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_metrics import files as files_backend
from diagnosis.evidence.tools.query_metrics import render
from diagnosis.evidence.tools.query_metrics.files import metrics_from_files, rates_apply
from diagnosis.evidence.tools.query_metrics.selector import selector_parse
from diagnosis.evidence.tools.query_metrics.series import Grid
from diagnosis.evidence.tools.query_metrics.statistics import series_analyse
from diagnosis.flow.trace_summary import trace_summary_build
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.evidence.packbuilder import fleet_pack_write, fleet_service_name

CONTEXT = {
    "now": "2026-03-02T10:40:00Z",
    "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
}
FAULTY = (7, 42)


@pytest.fixture(scope="module")
def fleet_pack(tmp_path_factory) -> Path:
    return fleet_pack_write(tmp_path_factory.mktemp("fleet") / "fleet", services=60, faulty=FAULTY)


def _session(owner, **environment) -> DiagnosisSession:
    env = Environment.objects.create(slug=environment.pop("slug"), name="fleet", **environment)
    return DiagnosisSession.objects.create(
        owner=owner, environment=env, original_query="哪个服务坏了", context=CONTEXT
    )


@pytest.fixture
def files_session(db, owner, fleet_pack):
    return _session(owner, slug="fleet-files", kind="scenario", pack_path=str(fleet_pack))


def _call(session, **arguments) -> ToolInvocation:
    result = tool_invoke(session=session, attempt=1, tool_name="query_metrics", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


def test_without_a_service_it_ranks_every_service_with_totals(files_session):
    row = _call(files_session)
    assert row.status == "ok"
    fleet = row.summary["fleet"]
    assert (fleet["services"], fleet["series"]) == (60, 300)
    assert fleet["anomalous"] == 6
    assert fleet["anomalous_services"] == 2
    ranked = [r["service"] for r in fleet["services_ranked"]]
    assert sorted(ranked) == [fleet_service_name(i) for i in FAULTY]
    assert "fleet totals: 60 services, 300 series, 6 anomalous (in 2 services)" in row.output
    for entry in fleet["services_ranked"]:
        assert entry["line"] in row.output
    # bounded: the top series with the rest counted, never all 300
    shown = row.summary["series"]
    assert len(shown) <= render.MAX_SERIES_SHOWN
    assert row.summary["omitted"] == 300 - len(shown)
    assert f"{300 - len(shown)} more series omitted" in row.output
    assert {s["service"] for s in shown[:6]} == set(ranked)


def test_one_service_cannot_fill_the_fleet_view(files_session, monkeypatch):
    monkeypatch.setattr(render, "MAX_SERIES_PER_SERVICE", 1)
    row = _call(files_session)
    services = [s["service"] for s in row.summary["series"]]
    assert len(services) == len(set(services))


def test_a_metric_without_a_service_is_ranked_across_the_fleet(files_session):
    row = _call(files_session, metric="http_request_duration_seconds")
    assert row.summary["fleet"]["series"] == 60
    top = row.summary["series"][0]
    assert top["service"] in {fleet_service_name(i) for i in FAULTY}
    assert top["direction"] == "up"
    assert "(all services)" in row.output.splitlines()[0]


def test_a_service_drill_down_has_no_fleet_view_and_full_resolution(files_session):
    row = _call(files_session, service=fleet_service_name(7))
    assert "fleet" not in row.summary
    assert row.summary["step"] == "1m"
    assert len(row.summary["series"]) == 5


def test_the_fleet_view_leads_the_verifier_trace_summary(files_session):
    _call(files_session)
    (entry,) = trace_summary_build(session=files_session)
    assert entry["summary"].startswith("fleet totals: 60 services, 300 series")


def test_a_whole_fleet_query_reads_each_metrics_file_once(files_session, fleet_pack, monkeypatch):
    opened: list[str] = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        if self.suffix == ".om":
            opened.append(self.name)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    _call(files_session)
    assert sorted(opened) == sorted(p.name for p in (fleet_pack / "metrics").glob("*.om"))


class FakePrometheus:
    """Answers query_range for plain selectors from the pack files, as Prometheus would
    (the latest raw sample within the lookback at each step), and counts the requests."""

    def __init__(self, pack: Path) -> None:
        self.files = tuple(sorted((pack / "metrics").glob("*.om")))
        self.queries: list[str] = []

    def get(self, url, params=None, headers=None, timeout=None):
        if url.endswith("/api/v1/metadata"):  # what scraping these files would have declared
            return self._metadata(url, params.get("metric"))
        self.queries.append(params["query"])
        selector = selector_parse(params["query"])
        assert selector is not None
        grid = Grid(float(params["start"]), float(params["end"]), float(params["step"]))
        series, _ = metrics_from_files(
            files=self.files, selector=selector, grid=grid, deadline=Deadline.after(60)
        )
        result = [
            {
                "metric": {"__name__": s.name, **s.labels},
                "values": [[t, repr(v)] for t, v in s.points],
            }
            for s in series
        ]
        body = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        return httpx.Response(
            200, content=json.dumps(body).encode(), request=httpx.Request("GET", url)
        )

    def _metadata(self, url: str, family: str | None) -> httpx.Response:
        data: dict[str, list[dict[str, str]]] = {}
        for path in self.files:
            for line in path.read_text(encoding="utf-8").splitlines():
                parts = line.split()
                if len(parts) >= 4 and parts[:2] == ["#", "TYPE"] and family in {None, parts[2]}:
                    data.setdefault(parts[2], []).append({"type": parts[3], "help": ""})
        body = {"status": "success", "data": data}
        return httpx.Response(
            200, content=json.dumps(body).encode(), request=httpx.Request("GET", url)
        )


@pytest.mark.parametrize("services", [20, 200])
def test_on_prometheus_the_fleet_is_one_query_whatever_its_size(
    db, owner, tmp_path, monkeypatch, services
):
    pack = fleet_pack_write(tmp_path / "fleet", services=services, faulty=(3,))
    fake = FakePrometheus(pack)
    monkeypatch.setattr(httpx.Client, "get", fake.get)
    session = _session(owner, slug="fleet-prom", kind="live", prometheus_url="http://prom")
    row = _call(session)
    assert fake.queries == ['{service!=""}']
    assert row.summary["fleet"]["services"] == services
    assert row.summary["fleet"]["services_ranked"][0]["service"] == fleet_service_name(3)


def test_files_and_prometheus_name_the_same_suspects_for_the_same_pack(
    files_session, fleet_pack, owner, monkeypatch
):
    fake = FakePrometheus(fleet_pack)
    monkeypatch.setattr(httpx.Client, "get", fake.get)
    live = _session(owner, slug="fleet-live", kind="live", prometheus_url="http://prom")
    from_files, from_prometheus = _call(files_session), _call(live)
    assert from_files.summary["fleet"] == from_prometheus.summary["fleet"]
    assert from_files.summary["series"] == from_prometheus.summary["series"]


def test_a_truncated_fleet_output_keeps_only_the_ranked_services_it_still_shows(
    files_session, settings
):
    settings.TOOL_OUTPUT_MAX_CHARS = 1000
    row = _call(files_session)
    assert row.truncated
    fleet = row.summary["fleet"]
    assert all(r["line"] in row.output for r in fleet["services_ranked"])
    assert len(fleet["services_ranked"]) + fleet["services_omitted"] == 2


def _fleet_series(pack: Path) -> tuple[list, Grid, QueryWindow]:
    window = QueryWindow.around(
        start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
    )
    grid = Grid.for_window(window, None)
    read, _ = metrics_from_files(
        files=sorted((pack / "metrics").glob("*.om")),
        selector=selector_parse('{service!=""}'),
        grid=grid,
        deadline=Deadline.after(60),
    )
    return list(rates_apply(read)), grid, window


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_fleet_view_folds_series_one_at_a_time_in_any_order_holding_a_bounded_few(
    fleet_pack, monkeypatch, seed
):
    series, grid, window = _fleet_series(fleet_pack)
    facts = sorted((series_analyse(s, window, grid.step) for s in series), key=render._ranking_key)
    expected, taken = [], Counter()  # the top of every series ranked at once, 3 a service
    for fact in facts:
        if len(expected) < render.MAX_SERIES_SHOWN and taken[fact.service] < 3:
            taken[fact.service] += 1
            expected.append(fact.line())
    held: list[int] = []
    real_add = render._Top.add

    def add(self, fact):
        real_add(self, fact)
        held.append(len(self.facts))

    monkeypatch.setattr(render._Top, "add", add)
    random.Random(seed).shuffle(series)
    out = render.metrics_render(
        series=series, window=window, grid=grid, description="(all services)", fleet=True
    )
    assert [s["line"] for s in out.summary["series"]] == expected
    assert max(held) < 4 * render.MAX_SERIES_SHOWN < len(series)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_a_series_read_from_files_keeps_only_the_samples_its_grid_uses_and_reads_the_same(
    tmp_path, monkeypatch, seed
):
    rng = random.Random(seed)
    start = 1_772_445_600
    # a fine scrape (every 7 s) over 40 minutes, out of order, some times repeated
    samples = [(start + 7 * i, rng.random()) for i in range(350)]
    samples += [(t, v + 1) for t, v in rng.sample(samples, 30)]
    rng.shuffle(samples)
    lines = [f'load{{service="pay"}} {v!r} {t}' for t, v in samples]
    (tmp_path / "a.om").write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    grid = Grid(start=start + 300, end=start + 2400, step=60)

    def read() -> list:
        series, _ = metrics_from_files(
            files=[tmp_path / "a.om"],
            selector=selector_parse("load"),
            grid=grid,
            deadline=Deadline.after(10),
        )
        return [(s.name, s.labels, s.points) for s in series]

    whole = read()
    compactions: list[int] = []
    real = files_backend._compacted

    def compacted(bucket, grid):
        compactions.append(len(bucket[0]))
        return real(bucket, grid)

    monkeypatch.setattr(files_backend, "_compacted", compacted)
    monkeypatch.setattr(files_backend, "COMPACT_MIN_SAMPLES", 40)
    monkeypatch.setattr(files_backend, "COMPACT_FACTOR", 0)
    assert read() == whole
    assert compactions and max(compactions) == 41  # never more held than the bound
