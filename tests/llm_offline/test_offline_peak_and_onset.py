"""Peak and onset agree: a window maximum from before the change is said to be so."""

from __future__ import annotations

import pytest
from django.utils import translation

from diagnosis.contracts import AllowedClaim, ComposerInput, Decision, Wording
from diagnosis.flow.coherence import answer_coherence_check
from diagnosis.offline.analysis import Call, LogSignal, MetricSignal, Suspect
from diagnosis.offline.claims import metric_claim, root_claim

LINE = (
    "cart container_cpu_usage_seconds_total: window max 0.8 at 04:03, mean 0.41, "
    "baseline mean 0.1, change point 04:09"
)


def _signal(peak_at: str, onset: str) -> MetricSignal:
    output = LINE.replace("04:03", peak_at[11:16]).replace("04:09", onset[11:16])
    call = Call(
        tool_name="query_metrics",
        arguments={"service": "cart"},
        invocation_id=1,
        trace_ref="trace-1",
        status="ok",
        output=output,
        summary={"window": {"start": "2026-05-04T04:00:00Z", "end": "2026-05-04T04:30:00Z"}},
    )
    return MetricSignal(
        call=call,
        service="cart",
        metric="container_cpu_usage_seconds_total",
        labels={},
        line=output,
        baseline_mean=0.1,
        window_max=0.8,
        window_max_at=peak_at,
        window_min=None,
        window_mean=0.41,
        change_point=onset,
        direction="up",
        anomaly=9.0,
        ratio=None,
        kind="resource",
        subkind="cpu",
    )


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize(
    ("peak_at", "onset", "before"),
    [
        ("2026-05-04T04:03:00Z", "2026-05-04T04:09:00Z", True),
        ("2026-05-04T04:13:00Z", "2026-05-04T04:09:00Z", False),
    ],
)
def test_the_stated_peak_comes_after_the_onset_or_says_it_came_before(lang, peak_at, onset, before):
    with translation.override("en" if lang == "en" else "zh-hans"):
        draft = metric_claim(_signal(peak_at, onset), lang)
    assert draft is not None
    said_before = ("早于变化" if lang == "zh" else "before the change") in draft.text
    assert said_before == before, draft.text
    claim = AllowedClaim(claim_id="c1", text=draft.text, wording=Wording.DEFINITE)
    composer_input = ComposerInput(decision=Decision.PASS, question="q", allowed_claims=[claim])
    found = answer_coherence_check(
        answer=f"**结论**\n\n- {draft.text}\n", composer_input=composer_input
    )
    assert [f.code.value for f in found] == []


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_peak_stated_is_the_shifts_own_when_the_tool_reports_it(lang):
    """The tool's line gives the maximum since the change beside the window's (statistics
    .shift_peak): the claim states that one, after the onset, and never the earlier spike."""
    signal = _signal("2026-05-04T04:03:00Z", "2026-05-04T04:09:00Z")
    line = signal.line + ", max since the change 0.6 at 04:15"
    signal.call.output = signal.line = line
    signal.shift_peak, signal.shift_peak_at = 0.6, "2026-05-04T04:15:00Z"
    with translation.override("en" if lang == "en" else "zh-hans"):
        draft = metric_claim(signal, lang)
    assert draft is not None
    assert "0.6" in draft.text and "04:15" in draft.text and "0.8" not in draft.text
    assert ("变化后最大值" if lang == "zh" else "maximum since the change") in draft.text
    claim = AllowedClaim(claim_id="c1", text=draft.text, wording=Wording.DEFINITE)
    composer_input = ComposerInput(decision=Decision.PASS, question="q", allowed_claims=[claim])
    found = answer_coherence_check(
        answer=f"**结论**\n\n- {draft.text}\n", composer_input=composer_input
    )
    assert [f.code.value for f in found] == []
    # the check reads the new form too: the same words with a time before the onset are found
    early = draft.text.replace("04:15", "04:05")
    found = answer_coherence_check(answer=f"**结论**\n\n- {early}\n", composer_input=composer_input)
    assert [f.code.value for f in found] == ["peak_before_onset"]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_root_cause_and_the_symptom_state_one_peak_for_one_series(lang):
    """One figure per series: the root-cause sentence and the series' own claim give the
    same peak (the shift's), not the window's earlier spike in one and the shift's in the
    other."""
    signal = _signal("2026-05-04T04:03:00Z", "2026-05-04T04:09:00Z")
    line = signal.line + ", sustained, max since the change 0.6 at 04:15"
    signal.call.output = signal.line = line
    signal.shift_peak, signal.shift_peak_at = 0.6, "2026-05-04T04:15:00Z"
    signal.sustained_points, signal.anomaly = 6, 25.0
    # busy CPU is load; a throttled one is exhaustion (Suspect.resource_metrics)
    signal.metric = "container_cpu_cfs_throttled_seconds_total"
    log_call = Call(
        tool_name="query_logs",
        arguments={"service": "cart"},
        invocation_id=2,
        trace_ref="trace-2",
        status="ok",
        output="2026-05-04T04:10:00Z ERROR cart CPU throttled, worker pool saturated",
        summary={},
    )
    log = LogSignal(
        call=log_call,
        service="cart",
        template="CPU throttled, worker pool saturated",
        level="error",
        count_window=12,
        count_baseline=0,
        first_seen="2026-05-04T04:10:00Z",
        last_seen="2026-05-04T04:20:00Z",
        is_new=True,
        surge=0.0,
        line=log_call.output,
        samples=[log_call.output],
        kind="resource",
        subkind="cpu",
        mentions=[],
        injected=False,
    )
    entry = Suspect(service="cart", metrics=[signal], logs=[log], kind="resource", subkind="cpu")
    with translation.override("en" if lang == "en" else "zh-hans"):
        found = root_claim(entry, lang)
        symptom = metric_claim(signal, lang)
    assert found is not None and symptom is not None
    root = found[0]
    assert "0.6" in root.text and "0.8" not in root.text, root.text
    assert "0.6" in symptom.text and "0.8" not in symptom.text, symptom.text
