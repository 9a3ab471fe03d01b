"""query_metrics through a real PromQL engine gives the same facts as through the pack files.

Each test runs against both engines: Prometheus, its TSDB backfilled from the pack's .om
files with ``promtool tsdb create-blocks-from openmetrics`` (tests/support/prometheus.py),
and VictoriaMetrics, loaded through its import API (tests/support/victoriametrics.py); each
serves the pack on a loopback port.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from diagnosis.evidence.common import Deadline, QueryWindow
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_metrics import engine
from diagnosis.evidence.tools.query_metrics import prometheus as prometheus_backend
from diagnosis.evidence.tools.query_metrics.query import _grid
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.evidence.packbuilder import fleet_pack_write, fleet_service_name, pack_write
from tests.support.binaries import require_binary
from tests.support.prometheus import PrometheusServer, own_metric, prometheus_running
from tests.support.victoriametrics import VictoriaMetricsServer, victoriametrics_running

pytestmark = pytest.mark.prometheus

REPO = Path(__file__).resolve().parents[2]
DEMO_PACK = REPO / "scenarios" / "payment-pool-saturation"


def _with_serviceless_series(pack: Path, *, named: str | None = None) -> Path:
    """The pack with a family whose series name no service (one of them shifts at 10:19);
    with ``named``, the family also has a series of that service (steady)."""
    start = 1_772_437_800  # 2026-03-02T07:50:00Z
    lines = ["# TYPE queue_depth gauge"]
    queues = [("a", False, ""), ("b", True, "")]
    if named:
        queues.append(("c", False, f'service="{named}",'))
    for queue, shifted, service in queues:
        for i in range(170):
            t = start + 60 * i
            level = 40 if shifted and t >= 1_772_446_740 else 4 + i % 3
            lines.append(f'queue_depth{{{service}queue="{queue}"}} {level} {t}')
    (pack / "metrics" / "queues.om").write_text("\n".join([*lines, "# EOF"]) + "\n")
    return pack


WINDOW_START = 1_772_445_600  # 2026-03-02T10:00:00Z, CONTEXT's window start


def _with_steps_at_the_window_start(pack: Path) -> Path:
    """The pack with a gauge at 1 and a counter rising 1 a second, each 100 times that from
    the sample at the window's start on: their baseline is constant, their window is not."""
    start = 1_772_437_800  # 2026-03-02T07:50:00Z
    gauge, counter, total = ["# TYPE step_level gauge"], ["# TYPE step_events counter"], 0
    for i in range(171):
        t = start + 60 * i
        factor = 100 if t >= WINDOW_START else 1
        total += 60 * factor if i else 0
        gauge.append(f'step_level{{service="pay"}} {factor} {t}')
        counter.append(f'step_events_total{{service="pay"}} {total} {t}')
    (pack / "metrics" / "steps.om").write_text("\n".join([*gauge, *counter, "# EOF"]) + "\n")
    return pack


# engine -> (the binaries it needs, its runner)
ENGINES = {
    "prometheus": (("prometheus", "promtool"), prometheus_running),
    "victoriametrics": (("victoria-metrics",), victoriametrics_running),
}
# engine -> a size limit the fixture pack's 1-minute grid exceeds and its 2-minute one does not
TINY_LIMITS = {
    "prometheus": ("--query.max-samples=300",),
    "victoriametrics": ("-search.maxPointsPerTimeseries=100",),
}


@pytest.fixture(scope="session")
def engine_packs(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine-packs")
    return {
        "fixture": pack_write(root / "fixture-pool"),
        "demo": DEMO_PACK,
        "fleet": fleet_pack_write(root / "fleet", services=60, faulty=FLEET_FAULTY),
        "mixed": _with_serviceless_series(
            pack_write(root / "mixed"),
        ),
        # a family with series of a service and series of none: the fleet view has only the
        # former (the engine is asked for the family whole and leaves the others out)
        "mixed-fleet": _with_serviceless_series(
            pack_write(root / "mixed-fleet", pack_id="mixed-fleet"), named="pay"
        ),
        "steps": _with_steps_at_the_window_start(pack_write(root / "steps", pack_id="steps")),
        # twice the services, other faults, other noise
        "fleet2": fleet_pack_write(
            root / "fleet2", services=120, faulty=(3, 77, 101), pack_id="fleet2", seed=29
        ),
    }


@pytest.fixture(scope="session", params=sorted(ENGINES))
def engine_servers(request, engine_packs, tmp_path_factory):
    """Each pack served by one engine: name -> (pack, url); the engine in ``engine``."""
    binaries, running = ENGINES[request.param]
    for binary in binaries:
        require_binary(binary)
    root = tmp_path_factory.mktemp(request.param)
    # Every server started is stopped, also when a later one fails to start.
    with ExitStack() as stack:
        servers = {
            name: stack.enter_context(running(pack, root / f"server-{name}"))
            for name, pack in engine_packs.items()
        }
        served = {name: (engine_packs[name], server.url) for name, server in servers.items()}
        yield {"engine": request.param, **served}


CONTEXT = {
    "now": "2026-03-02T10:40:00Z",
    "window": {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"},
}


def _sessions(owner, pack: Path, url: str) -> tuple[DiagnosisSession, DiagnosisSession]:
    files_env = Environment.objects.create(
        slug=f"files-{pack.name}", name="files", kind="scenario", pack_path=str(pack)
    )
    live_env = Environment.objects.create(
        slug=f"prom-{pack.name}", name="prom", kind="live", prometheus_url=url
    )
    return (
        DiagnosisSession.objects.create(
            owner=owner, environment=files_env, original_query="q", context=CONTEXT
        ),
        DiagnosisSession.objects.create(
            owner=owner, environment=live_env, original_query="q", context=CONTEXT
        ),
    )


def _both(files_session, live_session, arguments):
    rows = []
    for session in (files_session, live_session):
        result = tool_invoke(
            session=session, attempt=1, tool_name="query_metrics", arguments=arguments
        )
        rows.append(ToolInvocation.objects.get(pk=result.invocation_id))
    return rows


FLEET_FAULTY = (7, 42)

FIXTURE_CALLS = [
    {},
    {"service": "pay"},
    {"metric": "pool_active"},
    {"metric": 'pool_active{pool="main"}', "step": "5m"},
    {"metric": '{service=~"pay|gateway"}', "step": "120s"},
    {"service": "pay", "metric": "http_requests_total", "labels": {"status": "500"}},
    {"service": "gateway", "start": "2026-03-02T09:00:00Z", "end": "2026-03-02T09:45:00Z"},
]

FLEET_CALLS = [
    {},
    {"metric": "http_request_duration_seconds"},
    {"service": fleet_service_name(7)},
    {"step": "5m"},
]

DEMO_CALLS = [
    {},
    {"service": "payment-service"},
    {"metric": "hikaricp_connections_active"},
    {"service": "mysql"},
    {"metric": "http_requests_total", "step": "5m"},
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("pack_name", "arguments"),
    [("fixture", c) for c in FIXTURE_CALLS]
    + [("demo", c) for c in DEMO_CALLS]
    + [("fleet", c) for c in FLEET_CALLS],
)
def test_prometheus_and_the_files_report_the_same_facts(
    engine_servers, owner, pack_name, arguments
):
    pack, url = engine_servers[pack_name]
    files_session, live_session = _sessions(owner, pack, url)
    from_files, from_prometheus = _both(files_session, live_session, arguments)
    assert from_files.status == from_prometheus.status == "ok", from_prometheus.output
    assert from_prometheus.summary["series"], "Prometheus returned no series"
    assert from_files.summary == from_prometheus.summary
    assert from_files.output == from_prometheus.output


@pytest.mark.django_db
def test_prometheus_and_the_files_rank_the_same_fleet_suspects(engine_servers, owner):
    pack, url = engine_servers["fleet"]
    files_session, live_session = _sessions(owner, pack, url)
    from_files, from_prometheus = _both(files_session, live_session, {})
    suspects = [
        [r["service"] for r in row.summary["fleet"]["services_ranked"]]
        for row in (from_files, from_prometheus)
    ]
    assert suspects[0] == suspects[1]
    assert sorted(suspects[0]) == [fleet_service_name(i) for i in FLEET_FAULTY]
    assert from_prometheus.summary["fleet"]["services"] == 60


@pytest.mark.django_db
def test_a_promql_expression_is_evaluated_by_prometheus(engine_servers, owner):
    pack, url = engine_servers["fixture"]
    _, live_session = _sessions(owner, pack, url)
    result = tool_invoke(
        session=live_session,
        attempt=1,
        tool_name="query_metrics",
        arguments={"metric": "max by (service) (pool_active)", "service": "pay"},
    )
    assert result.status == "ok"
    (series,) = result.summary["series"]
    assert series["window_max"] == 20
    assert series["labels"] == {"service": "pay"}


@pytest.mark.django_db
def test_a_query_prometheus_rejects_is_an_error_with_its_reason(engine_servers, owner):
    pack, url = engine_servers["fixture"]
    _, live_session = _sessions(owner, pack, url)
    result = tool_invoke(
        session=live_session,
        attempt=1,
        tool_name="query_metrics",
        arguments={"metric": "sum(rate(pool_active[5m]"},
    )
    assert result.status == "error"
    assert "Prometheus rejected the query" in result.output


def _connections_accepted(engine: str, url: str) -> float:
    """The engine's own count of the HTTP connections it accepted, this read's included."""
    if engine == "victoriametrics":
        address = url.removeprefix("http://")
        return own_metric(url, f'vm_tcplistener_accepts_total{{name="http", addr="{address}"}}')
    return own_metric(url, 'net_conntrack_listener_conn_accepted_total{listener_name="http"}')


@pytest.mark.django_db
def test_query_metrics_calls_to_prometheus_share_one_connection(engine_servers, owner):
    pack, url = engine_servers["fixture"]
    _, live_session = _sessions(owner, pack, url)
    engine = engine_servers["engine"]
    before = _connections_accepted(engine, url)
    for arguments in FIXTURE_CALLS[:4]:
        result = tool_invoke(
            session=live_session, attempt=1, tool_name="query_metrics", arguments=arguments
        )
        assert result.status == "ok"
    # One connection for the read after; at most one for the four calls (none when an
    # earlier test's connection to this server is still in the pool).
    assert _connections_accepted(engine, url) - before <= 2


def test_promtool_is_on_the_path_when_prometheus_is():
    if shutil.which("prometheus"):
        assert shutil.which("promtool")


@pytest.mark.django_db
def test_a_subquery_is_evaluated_by_the_engine(engine_servers, owner):
    pack, url = engine_servers["demo"]
    _, live_session = _sessions(owner, pack, url)
    result = tool_invoke(
        session=live_session,
        attempt=1,
        tool_name="query_metrics",
        arguments={
            "metric": "max_over_time(sum by (service) (hikaricp_connections_active)[10m:1m])",
            "service": "payment-service",
        },
    )
    assert result.status == "ok", result.output
    (series,) = result.summary["series"]
    assert series["labels"] == {"service": "payment-service"}
    assert series["direction"] == "up"


@pytest.mark.django_db
def test_more_series_than_are_read_are_cut_with_a_note_on_either_engine(
    engine_servers, owner, monkeypatch
):
    monkeypatch.setattr(prometheus_backend, "MAX_SERIES_READ", 5)
    pack, url = engine_servers["fleet"]
    _, live_session = _sessions(owner, pack, url)
    result = tool_invoke(
        session=live_session,
        attempt=1,
        tool_name="query_metrics",
        arguments={"metric": "http_request_duration_seconds"},
    )
    assert result.status == "ok"
    assert result.summary["fleet"]["series"] == 5
    assert "more than 5 series matched; narrow the selector" in result.output


def test_the_metadata_answer_of_either_engine_reads_as_types_or_as_none(engine_servers):
    """Prometheus keeps no metadata for backfilled data, VictoriaMetrics none at all: both
    answer in the metadata shape, and the series are then judged by their names."""
    _, url = engine_servers["demo"]
    types = prometheus_backend.metric_types(
        base_url=url, token_env="", deadline=Deadline.after(5), names=["http_requests_total"]
    )
    assert types == {}
    answer = httpx.get(f"{url}/api/v1/metadata", params={"metric": "http_requests"}, timeout=5)
    assert answer.json() == {"status": "success", "data": {}}


class _Requests:
    """The engine requests a block sent: their API paths and the series each answer held."""

    def __init__(self, monkeypatch) -> None:
        self.paths: list[str] = []
        self.series: list[int] = []
        real = httpx.Client.get

        def get(client, url, *args, **kwargs):
            answer = real(client, url, *args, **kwargs)
            self.paths.append(url.rsplit("/api/v1/", 1)[-1])
            result = (answer.json().get("data") or {}) if answer.status_code == 200 else {}
            self.series.append(len(result.get("result") or []) if isinstance(result, dict) else 0)
            return answer

        monkeypatch.setattr(httpx.Client, "get", get)

    def read(self) -> int:
        """Series read as ranges (instant answers are a few numbers each)."""
        return sum(n for p, n in zip(self.paths, self.series, strict=True) if p == "query_range")


RANKED_CALLS = [
    ("mixed", {"metric": "queue_depth"}),
    ("mixed", {"metric": '{__name__=~"queue_depth|pool_active"}'}),
    ("mixed-fleet", {}),
    ("fleet", {}),
    ("fleet", {"metric": "http_requests_total"}),
    ("fleet", {"step": "5m"}),
    ("fleet2", {}),
    ("fleet2", {"metric": "process_resident_memory_bytes"}),
    ("demo", {}),
    ("demo", {"metric": "hikaricp_connections_active"}),
    ("fixture", {}),
    ("fixture", {"metric": '{service=~"pay|gateway"}'}),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("pack_name", "arguments"), RANKED_CALLS)
def test_ranked_in_the_engine_the_fleet_view_equals_the_ranking_of_every_series(
    engine_servers, owner, settings, monkeypatch, pack_name, arguments
):
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1  # every fleet is large here, on both sides
    pack, url = engine_servers[pack_name]
    files_session, live_session = _sessions(owner, pack, url)
    requests = _Requests(monkeypatch)
    from_files, from_engine = _both(files_session, live_session, arguments)
    assert from_engine.status == "ok", from_engine.output
    assert "query" in requests.paths  # the engine ranked
    assert from_files.summary == from_engine.summary
    assert from_files.output == from_engine.output


@pytest.mark.django_db
def test_ranked_in_the_engine_only_the_candidates_series_come_back(
    engine_servers, owner, settings, monkeypatch
):
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1
    monkeypatch.setattr(engine, "RANK_CANDIDATES", 2)
    pack, url = engine_servers["fleet2"]
    files_session, live_session = _sessions(owner, pack, url)
    requests = _Requests(monkeypatch)
    from_files, from_engine = _both(files_session, live_session, {})
    # two screens a family, five families, five series a service: whatever the fleet's size
    assert requests.read() <= 2 * 2 * 5 * 5 < from_engine.summary["fleet"]["series"] == 600
    assert from_engine.summary["fleet"] == from_files.summary["fleet"]


@pytest.mark.django_db
def test_ranked_in_the_engine_the_queries_do_not_grow_with_the_fleet(
    engine_servers, owner, settings, monkeypatch
):
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1
    sent = []
    for name in ("fleet", "fleet2"):
        pack, url = engine_servers[name]
        _, live_session = _sessions(owner, pack, url)
        requests = _Requests(monkeypatch)
        row = tool_invoke(session=live_session, attempt=1, tool_name="query_metrics", arguments={})
        assert row.status == "ok"
        sent.append(sorted(requests.paths))
    assert sent[0] == sent[1]  # 60 or 120 services: the same requests


@pytest.mark.django_db
def test_below_the_threshold_one_count_and_every_series_in_one_range_query(
    engine_servers, owner, settings, monkeypatch
):
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 10_000
    pack, url = engine_servers["fleet"]
    _, live_session = _sessions(owner, pack, url)
    requests = _Requests(monkeypatch)
    row = tool_invoke(session=live_session, attempt=1, tool_name="query_metrics", arguments={})
    assert row.status == "ok"
    # one cheap count of the live series, then every series in one range query: no screen
    assert [p for p in requests.paths if p != "metadata"] == ["query", "query_range"]
    assert requests.read() == 300


@pytest.fixture(scope="module", params=sorted(ENGINES))
def limited_engine(request, engine_packs, tmp_path_factory):
    """An engine with a tiny size limit serving the fixture pack: its url."""
    binaries, _ = ENGINES[request.param]
    for binary in binaries:
        require_binary(binary)
    server_class = PrometheusServer if request.param == "prometheus" else VictoriaMetricsServer
    workdir = tmp_path_factory.mktemp(f"limited-{request.param}") / "server"
    server = server_class(engine_packs["fixture"], workdir, TINY_LIMITS[request.param])
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.django_db
def test_a_query_the_engine_refuses_for_its_size_is_answered_at_a_coarser_step(
    limited_engine, engine_packs, owner
):
    _, live_session = _sessions(owner, engine_packs["fixture"], limited_engine)
    result = tool_invoke(
        session=live_session, attempt=1, tool_name="query_metrics", arguments={"service": "pay"}
    )
    assert result.status == "ok", result.output
    assert result.summary["step"] == "2m"
    assert "refused the query at step 1m for its size; answered at step 2m" in result.output


@pytest.mark.django_db
def test_ranked_in_the_engine_many_candidates_are_fetched_a_few_services_a_query(
    engine_servers, owner, settings, monkeypatch
):
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1
    monkeypatch.setattr(engine, "FETCH_SERVICES_PER_QUERY", 5)
    pack, url = engine_servers["fleet"]
    files_session, live_session = _sessions(owner, pack, url)
    requests = _Requests(monkeypatch)
    from_files, from_engine = _both(files_session, live_session, {})
    assert requests.paths.count("query_range") > 1
    assert from_files.output == from_engine.output


def _screen_levels(url: str, name: str, *, counter: bool) -> list[float]:
    """The window's level, the baseline's level and its spread, as a family's screen asks the
    engine for them over CONTEXT's window, for the one series of ``name``."""
    window = QueryWindow.around(
        start=datetime.fromtimestamp(WINDOW_START, UTC),
        end=datetime.fromtimestamp(WINDOW_START + 2400, UTC),
    )
    grid = _grid(window=window, step=None, sweep=True, clamps=None)
    ranges = engine._Ranges.of(grid, window.start.timestamp(), window.baseline_start.timestamp())
    family = engine._Family(name, (), counter, ranges)
    levels = []
    for expression in family._levels():
        (row,) = engine._instant(
            base_url=url, token_env="", query=expression, at=ranges.at, deadline=Deadline.after(10)
        )
        levels.append(engine._value(row))
    return levels


@pytest.mark.parametrize(("name", "counter"), [("step_level", False), ("step_events_total", True)])
def test_the_screens_baseline_holds_no_sample_of_the_window(engine_servers, name, counter):
    """The statistic's baseline ends where the window starts (half-open): the engine's screen
    reads the same baseline, so a series that changes at the window's first sample has the
    baseline it had before (its level, no spread), on either engine."""
    _, url = engine_servers["steps"]
    window_level, baseline_level, spread = _screen_levels(url, name, counter=counter)
    assert window_level == pytest.approx(100, rel=0.05)
    assert baseline_level == pytest.approx(1, rel=0.05)
    assert spread == pytest.approx(0, abs=1e-9)


@pytest.mark.django_db
def test_ranked_in_the_engine_the_totals_read_every_family_in_one_pass(
    engine_servers, owner, settings, monkeypatch
):
    """The totals count a service in several families once and each of its series, from one
    selector over every family (a selector is a pass over its series, the engine's cost)."""
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1
    pack, url = engine_servers["fleet"]
    files_session, live_session = _sessions(owner, pack, url)
    totals: list[str] = []
    real = engine._instant

    def instant(**kwargs):
        if kwargs["query"].startswith("count_values"):
            totals.append(kwargs["query"])
        return real(**kwargs)

    monkeypatch.setattr(engine, "_instant", instant)
    from_files, from_engine = _both(files_session, live_session, {})
    (query,) = totals
    assert query.count("[") == 1  # one range selector, five families
    assert from_engine.summary["fleet"] == from_files.summary["fleet"]
    assert from_engine.summary["fleet"]["services"] == 60
