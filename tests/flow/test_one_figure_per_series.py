"""One figure per series on the model path: a model Executor that reads one series over
two windows and claims both ratios gets an answer that states one, and reviewers see the
other claim and why it was left out."""

from __future__ import annotations

import shutil

import pytest
from django.urls import reverse

from diagnosis.contracts import Decision, ExecutorEvidenceV2, GatekeeperReport, VerifierOutput
from diagnosis.flow.coherence import answer_coherence_check, series_ratios
from diagnosis.flow.composer_filter import composer_input_build
from diagnosis.models import Environment
from tests.flow.conftest import MINI_PACK, composer_json, executor_json, verifier_json

SERIES = 'hikaricp_connections_active{pool="main"}'
SERVICES = ["payment-service", "order-service", "mysql"]
BASE = 1772438400  # 2026-03-02T08:00:00Z


@pytest.fixture
def mini_env(db, tmp_path):
    """The mini pack with a pool that steps up twice (6 → 12 at 10:15 → 30 at 10:30): a
    30-minute window and its last 10 minutes give the series two different ratios."""
    pack = tmp_path / "pack"
    shutil.copytree(MINI_PACK, pack)
    lines = ["# TYPE hikaricp_connections_active gauge"]
    for minute in range(161):
        value = (5, 6, 7)[minute % 3] if minute < 135 else (12 if minute < 150 else 30)
        lines.append(
            f'hikaricp_connections_active{{service="payment-service",pool="main"}} '
            f"{value} {BASE + 60 * minute}"
        )
    (pack / "metrics" / "pool.om").write_text("\n".join([*lines, "# EOF"]) + "\n")
    return Environment.objects.create(
        slug="mini-pool",
        name="mini",
        kind=Environment.Kind.SCENARIO,
        pack_path=str(pack),
        services=SERVICES,
    )


def _call(start: str) -> dict:
    arguments = {
        "service": "payment-service",
        "metric": "hikaricp_connections_active",
        "start": f"2026-03-02T{start}:00Z",
        "end": "2026-03-02T10:40:00Z",
    }
    return {"tool_calls": [{"name": "query_metrics", "arguments": arguments}]}


def _metric_claim(claim_id: str, trace: str, ratio: str, level: str) -> dict:
    return {
        "claim_id": claim_id,
        "claim_type": "symptom",
        "claim_text": f"payment-service 的 {SERIES} 约为基线的 {ratio} 倍",
        "entity": "payment-service",
        "support_level": "direct",
        "evidence_bindings": [
            {
                "source_type": "tool_trace",
                "source_id": trace,
                "tool_name": "query_metrics",
                "evidence_excerpt": f"level {level}, ratio {ratio}x",
            }
        ],
    }


def _ratios(text: str) -> set[float]:
    return {value for _key, value in series_ratios(text, SERVICES)}


@pytest.mark.parametrize(
    ("language", "answer"),
    [
        ("zh-CN", "**结论**\n\npayment-service 的 {s} 约为基线的 2 倍；又约为基线的 4.29 倍。\n"),
        (
            "en",
            "**Conclusion**\n\npayment-service {s} about 2× the baseline, "
            "about 4.29× the baseline.\n",
        ),
    ],
)
def test_two_windows_two_ratios_the_answer_states_one_and_reviewers_see_the_other(
    run_scripted, client, reviewer, language, answer
):
    script = {
        "executor": [
            _call("10:10"),
            _call("10:30"),
            executor_json(
                _metric_claim(
                    "claim-1", "trace-1", "2", "12 over 26 window points vs baseline median 6"
                ),
                _metric_claim(
                    "claim-2", "trace-2", "4.29", "30 over 11 window points vs baseline median 7"
                ),
            ),
        ],
        "verifier": [
            verifier_json(
                "PASS", **{"claim-1": "direct_observation", "claim-2": "direct_observation"}
            )
        ],
        "composer": [composer_json(answer.format(s=SERIES))],
    }
    session = run_scripted(script, language=language)
    evaluation = session.self_evaluation["verifier_evaluation"]
    gatekeeper = {
        c["claim_id"]: c["verdict"] for c in session.self_evaluation["gatekeeper"]["claims"]
    }
    assert gatekeeper == {"claim-1": "accepted", "claim-2": "accepted"}
    # the later reading of the series is stated, the earlier one is superseded
    assert evaluation["placements"] == {
        "claim-1": "superseded_figure",
        "claim-2": "allowed_claim",
    }
    assert _ratios(session.final_answer) == {4.29}
    assert evaluation["composer_output"]["coherence_findings"] == []
    client.force_login(reviewer)
    client.cookies["django_language"] = language
    page = client.get(reverse("audit:session_read", args=[session.public_id])).content.decode()
    assert "约为基线的 2 倍" in page  # the superseded claim, as the Executor wrote it
    label = (
        "同一序列的数值已由另一条结论给出"
        if language == "zh-CN"
        else "another claim gives this series&#x27; figure"
    )
    assert label in page


def _filtered(*claims: tuple[str, str, str, str], overstated: tuple[str, ...] = ()):
    """The Composer input of accepted claims ``(id, type, text, trace)``: direct
    observations, or overstated for the ids in ``overstated``."""
    output = ExecutorEvidenceV2.model_validate(
        {
            "claims": [
                {
                    "claim_id": cid,
                    "claim_type": ctype,
                    "claim_text": text,
                    "entity": "payment-service",
                    "support_level": "direct",
                    "evidence_bindings": [
                        {"source_type": "tool_trace", "source_id": trace, "evidence_excerpt": "x"}
                    ],
                }
                for cid, ctype, text, trace in claims
            ]
        }
    )
    gatekeeper = GatekeeperReport.model_validate(
        {
            "parse_status": "parsed_v2",
            "claims": [
                {"claim_id": c[0], "verdict": "accepted", "valid_bindings": 1} for c in claims
            ],
        }
    )
    verifier = VerifierOutput.model_validate(
        {
            "decision": "PASS",
            "claim_checks": [
                {
                    "claim_id": c[0],
                    "classification": "overstated" if c[0] in overstated else "direct_observation",
                }
                for c in claims
            ],
        }
    )
    return composer_input_build(
        question="q",
        language="zh-CN",
        decision=Decision.PASS,
        executor_output=output,
        gatekeeper=gatekeeper,
        verifier=verifier,
        services=SERVICES,
    )


def _text(service: str, metric: str, ratio: float) -> str:
    return f"{service} 的 {metric} 约为基线的 {ratio} 倍"


@pytest.mark.parametrize("service", ["payment-service", "order-service"])
@pytest.mark.parametrize("first_trace", ["trace-1", "trace-7"])
def test_a_cause_claims_figure_is_kept_whatever_its_invocation(service, first_trace):
    result = _filtered(
        ("a", "root_cause", _text(service, "p99", 3.5), first_trace),
        ("b", "symptom", _text(service, "p99", 9.1), "trace-9"),
    )
    assert [c.claim_id for c in result.composer_input.allowed_claims] == ["a"]
    assert result.placements["b"] == "superseded_figure"
    assert result.superseded == {"b": "a"}


@pytest.mark.parametrize(("early", "late"), [("trace-2", "trace-5"), ("trace-5", "trace-2")])
def test_among_equals_the_latest_invocations_figure_is_kept(early, late):
    result = _filtered(
        ("a", "symptom", _text("payment-service", "p99", 3.5), early),
        ("b", "symptom", _text("payment-service", "p99", 9.1), late),
    )
    kept = "a" if early > late else "b"
    assert [c.claim_id for c in result.composer_input.allowed_claims] == [kept]
    [(superseded, by)] = result.superseded.items()
    assert by == kept and result.placements[superseded] == "superseded_figure"


@pytest.mark.parametrize(
    "other",
    [
        _text("order-service", "p99", 9.1),  # another service
        _text("payment-service", "error_rate", 9.1),  # another metric
        _text("payment-service", "p99", 3.5),  # the same figure
        "payment-service 的 p99 升高",  # no figure
    ],
)
def test_claims_that_give_no_series_a_second_figure_are_all_kept(other):
    result = _filtered(
        ("a", "symptom", _text("payment-service", "p99", 3.5), "trace-1"),
        ("b", "symptom", other, "trace-2"),
    )
    assert [c.claim_id for c in result.composer_input.allowed_claims] == ["a", "b"]
    assert result.superseded == {}


def test_the_filtered_input_renders_one_figure_per_series():
    from diagnosis.flow.renderer import answer_render

    result = _filtered(
        ("a", "symptom", _text("payment-service", "p99", 3.5), "trace-1"),
        ("b", "symptom", _text("payment-service", "p99", 9.1), "trace-2"),
        ("c", "symptom", _text("order-service", "p99", 2.0), "trace-3"),
    )
    answer = answer_render(result.composer_input)
    assert (
        answer_coherence_check(
            answer=answer, composer_input=result.composer_input, services=SERVICES
        )
        == []
    )
    assert _ratios(answer) == {9.1, 2.0}


def test_an_overstated_claim_never_gives_a_stated_series_a_second_figure():
    result = _filtered(
        ("a", "symptom", _text("payment-service", "p99", 114.9), "trace-1"),
        ("b", "root_cause", _text("payment-service", "p99", 154.3), "trace-2"),
        ("c", "symptom", _text("order-service", "p99", 2.0), "trace-3"),
        overstated=("b", "c"),
    )
    composer_input = result.composer_input
    assert [c.claim_id for c in composer_input.allowed_claims] == ["a"]
    assert [h.claim_id for h in composer_input.allowed_hypotheses] == ["c"]
    assert result.placements["b"] == "superseded_figure" and result.superseded == {"b": "a"}
