"""Live environments that do not name their services with a ``service`` label.

An environment says which label names a service in its Prometheus
(``metrics_service_label``) and in its Loki (``logs_service_label``): every selector the
backends build uses it, and the series and streams come back with it read as
``service``, so the evidence is the same as for a fleet that uses ``service`` itself.
It also may carry its own call-edges query, which wins over the ``CALL_EDGES_QUERY``
setting.
"""

from __future__ import annotations

import re
import shutil
import threading
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from diagnosis.evidence import topology
from diagnosis.evidence.common import Deadline, QueryWindow
from diagnosis.evidence.invoke import tool_invoke
from diagnosis.evidence.tools.query_logs.filter import LogFilter
from diagnosis.evidence.tools.query_logs.loki import _loki_record, logs_from_loki
from diagnosis.evidence.tools.query_metrics import query as metrics_query_module
from diagnosis.evidence.tools.query_metrics.selector import labels_from_backend, selector_parse
from diagnosis.evidence.tools.query_metrics.series import RawSeries
from diagnosis.models import DiagnosisSession, Environment, ToolInvocation
from tests.evidence import test_loki_backend
from tests.evidence.packbuilder import pack_write
from tests.evidence.test_loki_backend import BASE, LokiStub
from tests.evidence.test_loki_backend import _entries as loki_entries
from tests.evidence.test_prometheus_backend import CONTEXT, FIXTURE_CALLS
from tests.support.prometheus import PrometheusServer

pytestmark = pytest.mark.django_db

EDGE_WINDOW = {
    "start": datetime(2026, 3, 2, 10, 0, tzinfo=UTC),
    "end": datetime(2026, 3, 2, 10, 40, tzinfo=UTC),
}

_SERVICE_MATCHER = re.compile(r"([{,])service=")


def _live(slug: str, **fields) -> Environment:
    return Environment.objects.create(slug=slug, name=slug, kind=Environment.Kind.LIVE, **fields)


def _session(owner, environment: Environment) -> DiagnosisSession:
    return DiagnosisSession.objects.create(
        owner=owner, environment=environment, original_query="q", context=CONTEXT
    )


def _metrics(session: DiagnosisSession, arguments: dict) -> ToolInvocation:
    result = tool_invoke(session=session, attempt=1, tool_name="query_metrics", arguments=arguments)
    return ToolInvocation.objects.get(pk=result.invocation_id)


# --- metrics through a real Prometheus ----------------------------------------------


def _relabelled_pack(pack: Path, target: Path) -> Path:
    """The pack's metrics with each series' service named by a ``job`` label instead."""
    (target / "metrics").mkdir(parents=True)
    for path in (pack / "metrics").glob("*.om"):
        text = _SERVICE_MATCHER.sub(r"\1job=", path.read_text(encoding="utf-8"))
        (target / "metrics" / path.name).write_text(text, encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def job_prometheus(tmp_path_factory):
    root = tmp_path_factory.mktemp("job-prometheus")
    pack = pack_write(root / "packs" / "fixture-pool")
    server = PrometheusServer(_relabelled_pack(pack, root / "job-pack"), root / "server")
    yield pack, server.url
    server.stop()


@pytest.mark.prometheus
@pytest.mark.parametrize("arguments", FIXTURE_CALLS)
def test_a_fleet_that_names_services_by_job_gives_the_evidence_of_the_pack_files(
    job_prometheus, owner, arguments
):
    pack, url = job_prometheus
    files_env = Environment.objects.create(slug="files", name="files", pack_path=str(pack))
    live_env = _live("jobs", prometheus_url=url, metrics_service_label="job")
    from_files = _metrics(_session(owner, files_env), arguments)
    from_prometheus = _metrics(_session(owner, live_env), arguments)
    assert from_files.status == from_prometheus.status == "ok", from_prometheus.output
    assert from_prometheus.summary["series"], "Prometheus returned no series"
    assert from_files.summary == from_prometheus.summary
    assert from_files.output == from_prometheus.output


@pytest.mark.prometheus
@pytest.mark.parametrize("arguments", [{}, {"metric": "pool_active"}])
def test_ranked_in_the_engine_a_fleet_named_by_job_gives_the_evidence_of_the_pack_files(
    job_prometheus, owner, settings, arguments
):
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1
    pack, url = job_prometheus
    files_env = Environment.objects.create(slug="files", name="files", pack_path=str(pack))
    live_env = _live("jobs", prometheus_url=url, metrics_service_label="job")
    from_files = _metrics(_session(owner, files_env), arguments)
    from_prometheus = _metrics(_session(owner, live_env), arguments)
    assert from_prometheus.status == "ok", from_prometheus.output
    assert from_files.summary == from_prometheus.summary
    assert from_files.output == from_prometheus.output


@pytest.mark.prometheus
@pytest.mark.parametrize(
    "metric",
    [
        "max by (job) (pool_active)",  # the environment's own label, as Prometheus names it
        "max by (service) (pool_active or cpu_usage)",  # service, as the model names it
    ],
)
def test_a_promql_result_is_filtered_and_shown_by_service_and_says_which_label(
    job_prometheus, owner, metric
):
    _, url = job_prometheus
    live_env = _live("jobs", prometheus_url=url, metrics_service_label="job")
    row = _metrics(_session(owner, live_env), {"metric": metric, "service": "pay"})
    assert row.status == "ok", row.output
    (series,) = row.summary["series"]
    assert series["labels"] == {"service": "pay"}
    assert series["window_max"] == 20
    assert "this environment names services with the label 'job'" in row.output


def _clashing_pack(pack: Path, target: Path) -> Path:
    """The pack with pay's pool scraped through a gateway: the scrape's ``service`` is
    ``pushgateway``, the series' own ``service="pay"`` renamed to ``exported_service``."""
    (target / "metrics").mkdir(parents=True)
    shutil.copy(pack / "scenario.yaml", target / "scenario.yaml")
    for path in (pack / "metrics").glob("*.om"):
        text = path.read_text(encoding="utf-8").replace(
            'pool_active{service="pay",',
            'pool_active{service="pushgateway",exported_service="pay",',
        )
        (target / "metrics" / path.name).write_text(text, encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def clashing_prometheus(tmp_path_factory):
    root = tmp_path_factory.mktemp("clashing-prometheus")
    pack = _clashing_pack(pack_write(root / "packs" / "fixture-pool"), root / "clash-pack")
    server = PrometheusServer(pack, root / "server")
    yield pack, server.url
    server.stop()


@pytest.mark.prometheus
@pytest.mark.parametrize("arguments", [{}, {"labels": {"exported_service": "pay"}}])
def test_a_series_with_a_clashing_service_label_is_ranked_under_its_scrapes_service(
    clashing_prometheus, owner, arguments
):
    pack, url = clashing_prometheus
    files_env = Environment.objects.create(slug="files", name="files", pack_path=str(pack))
    live_env = _live("clash", prometheus_url=url)
    from_files = _metrics(_session(owner, files_env), arguments)
    from_prometheus = _metrics(_session(owner, live_env), arguments)
    assert from_files.output == from_prometheus.output
    assert from_files.summary == from_prometheus.summary
    (pool,) = [s for s in from_prometheus.summary["series"] if s["metric"] == "pool_active"]
    assert (pool["service"], pool["labels"]["exported_service"]) == ("pushgateway", "pay")
    assert pool["line"].startswith('pushgateway pool_active{exported_service="pay",pool="main"}')
    assert "1 of " in from_prometheus.output
    assert "also carry exported_service (a service label of their own" in from_prometheus.output


# --- the queries sent --------------------------------------------------------------

# Each call and the selector sent to Prometheus, as it was before environments named a label.
SELECTORS_SENT = [
    ({}, '{service!=""}'),
    ({"service": "pay"}, '{service="pay"}'),
    ({"metric": "pool_active"}, "pool_active"),
    (
        {"service": "pay", "metric": 'pool_active{pool="main"}'},
        'pool_active{pool="main",service="pay"}',
    ),
    ({"metric": '{service=~"pay|gateway"}'}, '{service=~"pay|gateway"}'),
    ({"metric": "max by (service) (pool_active)"}, "max by (service) (pool_active)"),
]


def _queries_sent(owner, monkeypatch, environment: Environment) -> list[str]:
    sent: list[str] = []

    def prometheus(**kwargs):
        sent.append(kwargs["query"])
        return [], []

    monkeypatch.setattr(metrics_query_module, "metrics_from_prometheus", prometheus)
    session = _session(owner, environment)
    for arguments, _ in SELECTORS_SENT:
        assert _metrics(session, arguments).status == "no_data"
    return sent


@pytest.mark.parametrize("label", ["", "service"])
def test_without_a_label_of_its_own_the_prometheus_queries_are_unchanged(owner, monkeypatch, label):
    environment = _live("plain", prometheus_url="http://prom:9090", metrics_service_label=label)
    sent = _queries_sent(owner, monkeypatch, environment)
    assert sent == [query for _, query in SELECTORS_SENT]


def test_every_selector_names_the_service_with_the_environments_label(owner, monkeypatch):
    environment = _live("apps", prometheus_url="http://prom:9090", metrics_service_label="app")
    sent = _queries_sent(owner, monkeypatch, environment)
    assert sent == [
        '{app!=""}',
        '{app="pay"}',
        "pool_active",
        'pool_active{pool="main",app="pay"}',
        '{app=~"pay|gateway"}',
        "max by (app) (pool_active)",  # PromQL too speaks the environment's label
    ]


# PromQL as the model writes it (services in ``service``) and as Prometheus is asked it.
PROMQL_SENT = [
    (
        'sum by (service) (rate(http_requests_total{service="pay",status=~"5.."}[5m]))',
        'sum by (app) (rate(http_requests_total{app="pay",status=~"5.."}[5m]))',
    ),
    (
        "up / on (service) group_left (exported_service) max without (service, pod) (up)",
        "up / on (app) group_left (service) max without (app, pod) (up)",
    ),
    (
        'label_replace(up{pod=~"service-.*"}, "service", "$1", "pod", "(service)-.*")',
        'label_replace(up{pod=~"service-.*"}, "app", "$1", "pod", "(service)-.*")',
    ),
    (
        'label_replace(up{pod!=""} != 0, "service", "$1", "pod", "(.*)")',
        'label_replace(up{pod!=""} != 0, "app", "$1", "pod", "(.*)")',
    ),
    ('count_values("service", up) # by (service)', 'count_values("app", up) # by (service)'),
    ("sum(service) by (service)", "sum(service) by (app)"),  # a metric called service stays
]


@pytest.mark.parametrize(("written", "sent"), PROMQL_SENT)
def test_promql_written_with_service_is_sent_with_the_environments_label(
    owner, monkeypatch, written, sent
):
    asked: list[str] = []

    def prometheus(**kwargs):
        asked.append(kwargs["query"])
        return [], []

    monkeypatch.setattr(metrics_query_module, "metrics_from_prometheus", prometheus)
    environment = _live("apps", prometheus_url="http://prom:9090", metrics_service_label="app")
    assert _metrics(_session(owner, environment), {"metric": written}).status == "no_data"
    plain = _live("plain", prometheus_url="http://prom:9090")
    assert _metrics(_session(owner, plain), {"metric": written}).status == "no_data"
    assert asked == [sent, written]


def test_a_series_own_service_label_is_kept_apart_from_the_service_it_belongs_to():
    labels = {"app": "cart", "service": "cart-headless", "pod": "cart-1"}
    assert labels_from_backend(labels, "app") == {
        "service": "cart",
        "exported_service": "cart-headless",
        "pod": "cart-1",
    }
    assert labels_from_backend(labels, "service") is labels
    selector = selector_parse('up{service="cart",exported_service="cart-headless"}')
    assert selector is not None
    assert selector.relabelled("app").render() == 'up{app="cart",service="cart-headless"}'


@pytest.mark.parametrize("label", ["app", "exported_service"])
def test_no_label_is_lost_when_a_series_already_carries_exported_service(label):
    labels = {"app": "cart", "service": "cart-svc", "exported_service": "legacy", "pod": "c-1"}
    read = labels_from_backend(labels, label)
    assert sorted(read.values()) == sorted(labels.values())
    assert read["service"] == labels[label]
    # Asking by any label read back reaches the same backend label.
    matchers = ",".join(f'{k}="{v}"' for k, v in sorted(read.items()))
    selector = selector_parse("{" + matchers + "}")
    assert selector is not None
    sent = selector.relabelled(label).matchers
    assert {m.name: m.value for m in sent} == labels


# --- logs through the loopback Loki -------------------------------------------------


def _app_entries():
    """The Loki test's entries with each stream's service named by ``app``; the lines
    themselves say another service, which the stream label overrules."""
    out = []
    for ts, labels, line in loki_entries():
        stream = {("app" if k == "service" else k): v for k, v in labels.items()}
        out.append((ts, stream, line.replace('{"level"', '{"service": "pay-pod", "level"')))
    return out


@pytest.fixture
def app_loki(monkeypatch):
    LokiStub.requests = []
    LokiStub.delay = 0.0
    LokiStub.count_status = 200
    monkeypatch.setattr(test_loki_backend, "_entries", _app_entries)
    server = ThreadingHTTPServer(("127.0.0.1", 0), LokiStub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _from_loki(url: str, environment: Environment, service: str | None):
    end = datetime.fromtimestamp(BASE, UTC) + timedelta(minutes=40)
    return logs_from_loki(
        base_url=url,
        token_env="",
        tenant="",
        log_filter=LogFilter.build(service=service, query=None, level=None),
        window=QueryWindow.around(start=end - timedelta(minutes=40), end=end),
        limit=3,
        deadline=Deadline.after(10),
        service_label=environment.logs_label,
    )


@pytest.mark.parametrize(
    ("service", "selector"),
    [("pay", '{app="pay"}'), ("/pay|cart/", '{app=~"pay|cart"}'), (None, '{app=~".+"}')],
)
def test_loki_is_asked_by_the_environments_label_and_answers_by_service(
    app_loki, service, selector
):
    environment = _live("apps", loki_url=app_loki, logs_service_label="app")
    result = _from_loki(app_loki, environment, service)
    assert result.status == "ok", result.output
    assert {r["params"]["query"] for r in LokiStub.requests} == {selector}
    top = result.summary["templates"][0]
    assert (top["service"], top["level"], top["count_window"]) == ("pay", "ERROR", 21)
    assert top["samples"][0].startswith("2026-03-02T10:19:05Z pay ERROR Connection")


def test_a_query_logs_call_asks_loki_by_the_environments_label(app_loki, live_session):
    environment = live_session.environment
    environment.loki_url = app_loki
    environment.logs_service_label = "app"
    environment.save()
    result = tool_invoke(
        session=live_session, attempt=1, tool_name="query_logs", arguments={"service": "pay"}
    )
    invocation = ToolInvocation.objects.get(pk=result.invocation_id)
    assert invocation.status == "ok", invocation.output
    assert {r["params"]["query"] for r in LokiStub.requests} == {'{app="pay"}'}
    assert " pay ERROR " in invocation.output  # the stream label names the service


def test_without_a_logs_label_loki_is_asked_by_service(app_loki):
    environment = _live("plain", loki_url=app_loki)
    result = _from_loki(app_loki, environment, "pay")
    assert {r["params"]["query"] for r in LokiStub.requests} == {'{service="pay"}'}
    assert result.summary["templates"]  # the stub ignores selectors: the same lines


# --- call edges -----------------------------------------------------------------------


def test_the_environments_edge_query_wins_over_the_setting(settings, monkeypatch):
    settings.CALL_EDGES_QUERY = "sum by (source, destination) (rate(calls_total[5m]))"
    asked = []

    def answer(**kwargs):
        asked.append(kwargs["query"])
        labels = {"client_app": "web", "server_app": "cart"}
        return [RawSeries(name="", labels=labels, points=[(0.0, 1.0)])], []

    monkeypatch.setattr(topology, "metrics_from_prometheus", answer)
    own = "sum by (client_app, server_app) (rate(rpc_total[5m]))"
    environment = _live("edges", prometheus_url="http://prom:9090", call_edges_query=own)
    assert topology.environment_call_edges(environment=environment, **EDGE_WINDOW) == (
        ("web", "cart"),
    )
    plain = _live("plain", prometheus_url="http://prom:9090")
    topology.environment_call_edges(environment=plain, **EDGE_WINDOW)
    assert asked == [own, settings.CALL_EDGES_QUERY]


# --- what an environment accepts ------------------------------------------------------


@pytest.mark.parametrize("label", ["job", "app_kubernetes_io_name", "service_name", "_x1"])
def test_a_label_name_is_accepted(label):
    environment = Environment(
        slug="e", name="e", metrics_service_label=label, logs_service_label=label
    )
    environment.full_clean()


@pytest.mark.parametrize("label", ["app.kubernetes.io/name", "1app", "__name__", "a b", 'a"'])
def test_what_is_not_a_label_name_is_refused(label):
    with pytest.raises(ValidationError) as raised:
        Environment(slug="e", name="e", logs_service_label=label).full_clean()
    assert set(raised.value.message_dict) == {"logs_service_label"}


@pytest.mark.parametrize("query", ["   ", "up\x00", "x" * 2001])
def test_an_edge_query_that_cannot_be_promql_is_refused(query):
    with pytest.raises(ValidationError) as raised:
        Environment(slug="e", name="e", call_edges_query=query).full_clean()
    assert set(raised.value.message_dict) == {"call_edges_query"}


def test_a_superuser_sets_the_labels_and_the_edge_query_in_admin(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser(username="root", password="pw"))
    add = reverse("admin:diagnosis_environment_add")
    assert "留空表示 service" in client.get(add).content.decode()
    client.cookies["django_language"] = "en"
    assert "blank means service" in client.get(add).content.decode()
    fields = {
        "slug": "prod",
        "name": "Prod",
        "kind": "live",
        "services": "[]",
        "prometheus_url": "https://prometheus.example.com",
        "metrics_service_label": "app.kubernetes.io/name",
        "logs_service_label": "app",
        "call_edges_query": "sum by (source_workload, destination_workload) (up)\n",
    }
    refused = client.post(add, fields)
    assert refused.status_code == 200
    assert not Environment.objects.filter(slug="prod").exists()
    saved = client.post(add, {**fields, "metrics_service_label": "app_kubernetes_io_name"})
    assert saved.status_code == 302, saved.content[:3000]
    environment = Environment.objects.get(slug="prod")
    assert (environment.metrics_label, environment.logs_label) == ("app_kubernetes_io_name", "app")
    assert environment.call_edges_query.startswith("sum by (source_workload")


def test_without_a_logs_label_a_json_lines_service_field_still_names_its_service():
    line = '{"service": "pay", "level": "error", "message": "boom"}'
    default = _loki_record({"service": "ingress"}, "1772445600000000000", line, "service")
    assert default.service == "pay"  # as before per-environment labels existed
    labelled = _loki_record({"app": "ingress"}, "1772445600000000000", line, "app")
    assert labelled.service == "ingress"  # the environment's own label wins


def test_a_label_saved_without_validation_never_reaches_a_query(db):
    environment = _live("raw", logs_service_label='app"} |= "x', metrics_service_label="__name__")
    assert environment.logs_label == "service"
    assert environment.metrics_label == "service"
