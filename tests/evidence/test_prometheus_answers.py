"""How query_metrics reads a Prometheus answer: the matrix decoded with Python's cyclic
garbage collector paused, and the collector as it was afterwards, whatever the answer; a query
refused for its size narrowed or named as a gap."""

from __future__ import annotations

import gc
import json
import math
from datetime import UTC, datetime
from types import SimpleNamespace

import httpx
import pytest

from diagnosis.evidence import invoke
from diagnosis.evidence.common import Deadline, QueryWindow, ToolFailure
from diagnosis.evidence.tools.query_metrics import engine, prometheus
from diagnosis.evidence.tools.query_metrics.query import metrics_query
from diagnosis.models import ToolInvocation

WINDOW = QueryWindow.around(
    start=datetime(2026, 3, 2, 10, 0, tzinfo=UTC), end=datetime(2026, 3, 2, 10, 40, tzinfo=UTC)
)
MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "pool_active", "service": "pay"},
                "values": [[1772438400 + 60 * i, "20" if i > 100 else "5"] for i in range(121)],
            }
        ],
    },
}


def _answering(monkeypatch, status: int, body: dict) -> list[dict]:
    seen: list[dict] = []

    def get(_client, url, **kwargs):
        seen.append({"enabled": gc.isenabled(), "headers": kwargs["headers"]})
        return httpx.Response(status, content=json.dumps(body).encode())

    monkeypatch.setattr(httpx.Client, "get", get)
    return seen


def _query(**asked):
    """query_metrics on a Prometheus at a fixed URL: the whole fleet unless ``asked`` says."""
    return metrics_query(
        **{
            "service": None,
            "metric": None,
            "labels": {},
            "window": WINDOW,
            "step": None,
            "deadline": Deadline.after(10),
            "prometheus_url": "http://prometheus:9090",
            **asked,
        }
    )


def _sweep():
    return _query()


def _collector_state(monkeypatch) -> list[bool]:
    """Whether the collector ran while each matrix was decoded."""
    states: list[bool] = []
    real = prometheus._series_read

    def read(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(prometheus, "_series_read", read)
    return states


def test_a_fleet_matrix_is_decoded_with_the_collector_paused_and_resumed_after(monkeypatch):
    seen = _answering(monkeypatch, 200, MATRIX)
    states = _collector_state(monkeypatch)
    assert gc.isenabled()
    output = _sweep()
    assert output.status == "ok"
    assert output.summary["series"][0]["direction"] == "up"
    assert states == [False]
    assert seen[0]["enabled"]  # not paused while waiting for Prometheus
    assert seen[0]["headers"]["Accept-Encoding"] == "identity"
    assert gc.isenabled()


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"status": "error", "error": "parse error"}),
        (200, {"status": "success", "data": {"resultType": "vector", "result": []}}),
    ],
)
def test_a_refused_answer_leaves_the_collector_running(monkeypatch, status, body):
    _answering(monkeypatch, status, body)
    with pytest.raises(ToolFailure):
        _sweep()
    assert gc.isenabled()


def test_a_process_that_turned_the_collector_off_keeps_it_off(monkeypatch):
    _answering(monkeypatch, 200, MATRIX)
    gc.disable()
    try:
        assert _sweep().status == "ok"
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_aggregation_is_named_by_the_promql_as_written_not_as_relabelled(monkeypatch):
    # In an environment whose services are labelled "app", the model writes `service`; the
    # query sent says `app`, but the series it gets back is named as the model wrote it.
    matrix = json.loads(json.dumps(MATRIX))
    del matrix["data"]["result"][0]["metric"]["__name__"]
    matrix["data"]["result"][0]["metric"] = {"app": "pay"}
    _answering(monkeypatch, 200, matrix)
    output = _query(metric="max by (service) (pool_active)", service_label="app")
    assert output.status == "ok"
    assert "max by (service) (pool_active)" in output.output
    assert "max by (app)" not in output.output


# --- limits that say so ----------------------------------------------------------------

REFUSALS = [
    # Prometheus' --query.max-samples and its points a series
    (422, "query processing would load too many samples into memory in query execution"),
    (400, "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query"),
    # VictoriaMetrics' -search.maxSamplesPerQuery and -search.maxPointsPerTimeseries
    (422, "cannot select more than -search.maxSamplesPerQuery=1000 samples; possible solutions"),
    (422, "cannot generate more than -search.maxPointsPerTimeseries=100 points"),
    # Mimir's and Thanos' wording, as documented (no server of theirs runs here)
    (422, "the query exceeded the maximum number of series (limit: 100000 series)"),
    (422, "expanding series: exceeded series limit: limit 1000 violated (got 1001)"),
]


def _refusing_below(monkeypatch, step: float, detail: str, status: int) -> list[float]:
    """A range query at a finer step than ``step`` is refused for its size; the steps asked."""
    asked: list[float] = []

    def get(_client, url, **kwargs):
        if url.endswith("/metadata"):
            return httpx.Response(200, json={"status": "success", "data": {}})
        asked.append(float(kwargs["params"]["step"]))
        if asked[-1] < step:
            body: dict = {"status": "error", "errorType": "execution", "error": detail}
            return httpx.Response(status, content=json.dumps(body).encode())
        return httpx.Response(200, content=json.dumps(MATRIX).encode())

    monkeypatch.setattr(httpx.Client, "get", get)
    return asked


@pytest.mark.parametrize(("status", "detail"), REFUSALS)
def test_a_query_refused_for_its_size_is_asked_again_at_a_coarser_step_and_says_so(
    monkeypatch, status, detail
):
    asked = _refusing_below(monkeypatch, 240, detail, status)
    output = _query(service="pay")
    assert output.status == "ok"
    assert asked == [60, 120, 240]
    assert output.summary["step"] == "4m"
    assert "refused the query at step 1m for its size; answered at step 2m" in output.output
    assert "refused the query at step 2m for its size; answered at step 4m" in output.output


@pytest.mark.parametrize(("status", "detail"), REFUSALS)
def test_a_query_too_big_at_every_step_is_an_error_that_says_how_to_narrow_it(
    monkeypatch, status, detail
):
    asked = _refusing_below(monkeypatch, math.inf, detail, status)
    with pytest.raises(ToolFailure) as failed:
        _query(service="pay")
    assert "still too big at step" in str(failed.value)
    assert "narrow the query" in str(failed.value)
    assert len(asked) <= 4  # a bounded number of tries, never the deadline


def test_a_query_refused_for_its_text_is_not_asked_again(monkeypatch):
    asked = _refusing_below(monkeypatch, math.inf, "parse error at char 4", 400)
    with pytest.raises(ToolFailure) as failed:
        _sweep()
    assert not isinstance(failed.value, prometheus.EngineRefusedSize)
    assert len(asked) == 1


AT = 1772448000  # the window's end: the screens' evaluation time


def _vector(rows: list[dict]) -> dict:
    return {"status": "success", "data": {"resultType": "vector", "result": rows}}


def _screening_engine(
    monkeypatch, *, families: list[str], services: int, screen, fetched: list[str] | None = None
) -> None:
    """A fake engine for the fleet screen: ``families`` listed, ``services`` services of one
    series each counted, every candidate's matrix MATRIX; ``screen(query)`` answers each
    family's screen, given the request's timeout (a body, or an httpx.Response for a
    refusal)."""

    def get(_client, url, **kwargs):
        query = kwargs["params"].get("query", "")
        if url.endswith("/label/__name__/values"):
            body = {"status": "success", "data": families}
        elif url.endswith("/metadata"):
            body = {"status": "success", "data": {}}
        elif url.endswith("/query_range"):
            if fetched is not None:
                fetched.append(query)
            body = MATRIX
        elif query.startswith("count_values"):  # the totals: services of one series each
            row = {"metric": {"rootproof_named": "1", "rootproof_series": "1"}}
            body = _vector([{**row, "value": [AT, str(services)]}])
        elif query.startswith("count("):
            body = _vector([{"metric": {}, "value": [AT, str(services)]}])
        else:
            body = screen(query, kwargs["timeout"])
        if isinstance(body, httpx.Response):
            return body
        return httpx.Response(200, content=json.dumps(body).encode())

    monkeypatch.setattr(httpx.Client, "get", get)


def test_a_family_the_engine_refuses_to_screen_is_a_gap_the_fleet_view_names(monkeypatch):
    def screen(query: str, _timeout: float):
        if "queue_depth" in query:
            body = {"status": "error", "error": "query processing would load too many samples"}
            return httpx.Response(422, content=json.dumps(body).encode())
        return _vector([{"metric": {"service": "pay"}, "value": [AT, "1"]}])

    _screening_engine(
        monkeypatch, families=["pool_active", "queue_depth"], services=1, screen=screen
    )
    output = _query(rank_min_series=1)
    assert output.status == "ok"
    assert "the metrics engine refused to screen queue_depth for its size" in output.output
    assert output.summary["fleet"]["services"] == 1
    assert output.summary["series"][0]["service"] == "pay"


def test_a_screen_filled_by_stopped_services_is_asked_again_for_the_changed_ones(monkeypatch):
    """A family's screen lists the services whose series stopped (+Inf) before those ranked by
    change: when the stopped ones fill the answer, the changes are asked for alone, so a
    changed service is still read and ranked."""
    stopped = [{"metric": {"service": f"gone-{i:02d}"}, "value": [AT, "+Inf"]} for i in range(40)]
    fetched: list[str] = []

    def screen(query: str, _timeout: float) -> dict:
        if query.startswith(f"topk({engine._screen_top()},"):
            return _vector(stopped[: engine._screen_top()])
        return _vector([{"metric": {"service": "pay"}, "value": [AT, "12"]}])  # changes alone

    _screening_engine(
        monkeypatch, families=["pool_active"], services=41, screen=screen, fetched=fetched
    )
    output = _query(rank_min_series=1)
    assert output.status == "ok", output.output
    assert any('"pay' in query or "|pay" in query for query in fetched), fetched
    assert output.summary["series"][0]["service"] == "pay"
    assert output.summary["fleet"]["services"] == 41


# --- the screens' share of the deadline -------------------------------------------------


class _Clock:
    """A clock the fake engine moves as it answers: no test waits or reads the wall clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _slow_engine(monkeypatch, clock: _Clock, seconds, answered_late) -> list[tuple[str, float]]:
    """A fake engine of two families, pool_active and queue_depth, that takes ``seconds(query)``
    of ``clock`` to answer each screen, one at a time: within the request's timeout it answers
    (pay ranks in every family), past it the client gives up at its timeout, as httpx does
    (``answered_late`` None), or the engine answers ``answered_late`` (its own timeout error).
    The queries sent and the timeout each was given."""
    monkeypatch.setattr(engine, "ENGINE_CONCURRENCY", 1)  # the clock moves in one thread
    sent: list[tuple[str, float]] = []

    def screen(query: str, timeout: float):
        sent.append((query, timeout))
        took = seconds(query)
        if took > timeout:
            clock.now += timeout
            if answered_late is None:
                raise httpx.ReadTimeout("timed out")
            return httpx.Response(503, content=json.dumps(answered_late).encode())
        clock.now += took
        return _vector([{"metric": {"service": "pay"}, "value": [AT, "9"]}])

    _screening_engine(
        monkeypatch, families=["pool_active", "queue_depth"], services=2, screen=screen
    )
    return sent


ENGINE_TIMEOUTS = [
    None,  # no answer: the client's timeout
    # Prometheus' own answer at the timeout it was sent with
    {"status": "error", "errorType": "timeout", "error": "query timed out in query execution"},
    # Prometheus' while it was still selecting the series, and VictoriaMetrics' (1.79)
    {
        "status": "error",
        "errorType": "execution",
        "error": "expanding series: context deadline exceeded",
    },
    {
        "status": "error",
        "errorType": "422",
        "error": 'error when executing query="topk(33, …)": cannot evaluate "rate(x[60s])": '
        "timeout exceeded before starting the query processing: 0.300 seconds (elapsed 1.582 "
        "seconds); the timeout can be adjusted with `-search.maxQueryDuration` command-line flag",
    },
]


@pytest.mark.parametrize("answered_late", ENGINE_TIMEOUTS)
def test_a_family_not_screened_within_its_share_is_named_and_the_rest_still_rank(
    monkeypatch, answered_late
):
    clock = _Clock()
    sent = _slow_engine(
        monkeypatch, clock, lambda q: 60.0 if "queue_depth" in q else 0.5, answered_late
    )
    deadline = Deadline.after(15, clock=clock)
    output = _query(rank_min_series=1, deadline=deadline)
    assert output.status == "ok"
    assert (
        "the metrics engine did not screen queue_depth within the 12.8 s the fleet view gives "
        "its screens: those families are not in the ranking" in output.output
    )
    assert "pool_active" not in output.output.split("fleet totals")[0]  # only the late one named
    assert output.summary["series"][0]["service"] == "pay"
    # the slow screen was given what was left of the share, not the call's whole deadline
    (late,) = [timeout for query, timeout in sent if "queue_depth" in query]
    assert late <= 15 * engine.SCREENS_SHARE
    assert deadline.remaining() > 0  # the candidates were read within the call's deadline


def test_a_screen_whose_share_is_spent_is_not_sent_and_the_totals_say_so(monkeypatch):
    clock = _Clock()
    # pool_active answers just inside the share: queue_depth and the totals are left no time
    just_inside = 15 * engine.SCREENS_SHARE - 0.05
    sent = _slow_engine(
        monkeypatch, clock, lambda q: just_inside if "pool_active" in q else 0.5, None
    )
    output = _query(rank_min_series=1, deadline=Deadline.after(15, clock=clock))
    assert output.status == "ok"
    assert [query for query, _ in sent if "queue_depth" in query] == []
    assert "did not screen queue_depth within" in output.output
    assert "did not count the fleet's services and series within" in output.output
    assert "the totals are of the candidates read (2 series report at the window's end)" in (
        output.output
    )
    assert output.summary["series"][0]["service"] == "pay"


def test_a_fleet_with_no_family_screened_in_time_is_an_error_that_says_how_to_narrow_it(
    monkeypatch,
):
    clock = _Clock()
    _slow_engine(monkeypatch, clock, lambda q: 60.0, None)
    with pytest.raises(ToolFailure) as failed:
        _query(rank_min_series=1, deadline=Deadline.after(15, clock=clock))
    assert "did not screen pool_active, queue_depth within the 12.8 s" in str(failed.value)
    assert "name one as metric to rank it" in str(failed.value)
    assert "totals" not in str(failed.value)


def test_a_fleet_call_with_a_family_past_its_share_is_persisted_ok_not_timeout(
    monkeypatch, settings, live_session
):
    clock = _Clock()
    # The call's own deadline (TOOL_TIMEOUT_SECONDS) on the fake engine's clock.
    monkeypatch.setattr(
        invoke, "Deadline", SimpleNamespace(after=lambda s: Deadline.after(s, clock=clock))
    )
    _slow_engine(monkeypatch, clock, lambda q: 60.0 if "queue_depth" in q else 0.5, None)
    settings.METRICS_ENGINE_RANK_MIN_SERIES = 1
    settings.TOOL_TIMEOUT_SECONDS = 15
    live_session.environment.prometheus_url = "http://prometheus:9090"
    live_session.environment.save()
    result = invoke.tool_invoke(
        session=live_session, attempt=1, tool_name="query_metrics", arguments={}
    )
    row = ToolInvocation.objects.get(pk=result.invocation_id)
    assert row.status == "ok", row.output
    assert "did not screen queue_depth within the 12.8 s" in row.output
    assert row.summary["series"][0]["service"] == "pay"


def test_a_fleet_whose_candidates_are_not_read_in_time_is_an_error_naming_them(monkeypatch):
    """The screens answered, then the engine stalled on the candidates' series: the error
    names the services the screens found, so the next call can ask for one (not a timeout)."""
    clock = _Clock()
    _slow_engine(monkeypatch, clock, lambda q: 0.5, None)
    screened = httpx.Client.get

    def stalled(client, url, **kwargs):
        if url.endswith("/query_range"):
            clock.now += kwargs["timeout"]
            raise httpx.ReadTimeout("timed out")
        return screened(client, url, **kwargs)

    monkeypatch.setattr(httpx.Client, "get", stalled)
    with pytest.raises(ToolFailure) as failed:
        _query(rank_min_series=1, deadline=Deadline.after(15, clock=clock))
    assert "screened the fleet but did not return the candidate services' series" in str(
        failed.value
    )
    assert "the screens found changes in pay: ask for one of them as service" in str(failed.value)
