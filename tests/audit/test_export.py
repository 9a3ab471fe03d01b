"""Export of a session as a regression case, and its replay by `evaluate`."""

import io
import json
import zipfile
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse

from audit.export import NON_MATCHING_ID, case_pack_build, scripted_turns
from audit.models import AuditEvent
from audit.services import ClaimJudgement, review_record, session_export
from diagnosis.flow import selection
from diagnosis.flow.run import diagnosis_run
from diagnosis.llm.base import Role
from diagnosis.llm.scripted import ScriptedProvider
from diagnosis.models import DiagnosisSession, Environment, LLMCall, ToolInvocation
from diagnosis.services import diagnosis_submit
from tests.flow.conftest import (
    EXCERPT,
    MINI_PACK,
    PLANNER,
    QUERY_LOGS,
    composer_json,
    executor_json,
    log_claim,
    verifier_json,
)

pytestmark = pytest.mark.django_db

QUESTION = "payment-service 从 10:20 开始大量超时，帮我看看原因"


# --- what the pack holds ---------------------------------------------------------------


def test_the_pack_holds_the_question_time_recorded_calls_and_scripted_turns(make_session):
    session = make_session()
    pack = case_pack_build(session=session)
    assert pack.case_id == f"case-{session.public_id.hex[:12]}"
    header = yaml.safe_load(pack.files["scenario.yaml"])
    assert header["id"] == pack.case_id
    assert header["question"] == session.original_query
    assert header["now"] == "2026-03-02T10:40:00Z"
    assert header["window"] == {"start": "2026-03-02T10:00:00Z", "end": "2026-03-02T10:40:00Z"}
    assert header["language"] == "zh-CN"
    assert header["services"] == ["payment-service", "order-service", "mysql"]
    assert header["expected"] == {
        "must_not_claim": [],
        "decision": "PASS",
        "answer_source": "composer",
    }
    recorded = [json.loads(line) for line in pack.files["recorded/invocations.jsonl"].splitlines()]
    assert [(r["tool_name"], r["status"]) for r in recorded] == [
        ("query_logs", "ok"),
        ("query_metrics", "ok"),
    ]
    assert recorded[0]["arguments"] == {"service": "payment-service", "level": "ERROR"}
    assert recorded[0]["output"].startswith("query_logs service=payment-service")
    assert sorted(p for p in pack.files if p.startswith("scripted/")) == [
        "scripted/composer.json",
        "scripted/executor-1.json",
        "scripted/executor-2.json",
        "scripted/planner.json",
        "scripted/verifier.json",
    ]
    # The offline engine recorded no tool-calling turn: its invocations are re-issued first.
    first = json.loads(pack.files["scripted/executor-1.json"])
    assert first == {
        "tool_calls": [
            {"name": "query_logs", "arguments": {"service": "payment-service", "level": "ERROR"}},
            {
                "name": "query_metrics",
                "arguments": {
                    "service": "payment-service",
                    "metric": "hikaricp_connections_active",
                },
            },
        ]
    }
    final = json.loads(json.loads(pack.files["scripted/executor-2.json"])["content"])
    # Database ids differ in a replay: ids naming this session's invocations are dropped.
    assert final["claims"][0]["evidence_bindings"][0]["source_invocation_ids"] == []
    assert final["claims"][0]["evidence_bindings"][0]["source_id"] == "trace-1"
    composer = json.loads(pack.files["scripted/composer.json"])
    assert composer == {
        "content": LLMCall.objects.get(session=session, role="composer").raw_response
    }


def test_claims_a_reviewer_marked_wrong_become_must_not_claim(make_session, reviewer):
    session = make_session()
    review_record(
        session=session,
        reviewer=reviewer,
        verdict="partly_correct",
        claims=[
            ClaimJudgement(claim_id="claim-1", agrees_with_verifier=True),
            ClaimJudgement(claim_id="claim-2", agrees_with_verifier=False),
            # Disagreeing on a claim that was not allowed adds nothing to must_not_claim.
            ClaimJudgement(claim_id="claim-3", agrees_with_verifier=False),
        ],
    )
    header = yaml.safe_load(case_pack_build(session=session).files["scenario.yaml"])
    assert header["expected"]["must_not_claim"] == ["payment-service 连接池活跃连接达到上限 20"]


def test_a_wrong_or_unsafe_review_makes_every_allowed_claim_must_not_claim(make_session, reviewer):
    session = make_session()
    review_record(session=session, reviewer=reviewer, verdict="unsafe")
    header = yaml.safe_load(case_pack_build(session=session).files["scenario.yaml"])
    assert header["expected"]["must_not_claim"] == [
        "payment-service 出现连接池超时日志",
        "payment-service 连接池活跃连接达到上限 20",
    ]


def _call(**fields):
    defaults = {"attempt": 1, "provider": "openai", "model": "m", "status": "ok"}
    return LLMCall(**{**defaults, **fields})


def test_openai_turns_become_tool_call_and_content_turns_and_retried_failures_are_dropped():
    def body(message):
        return json.dumps({"choices": [{"message": message, "finish_reason": "stop"}]})

    tool_turn = body(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "query_logs",
                        "arguments": '{"service": "payment-service"}',
                    },
                }
            ],
        }
    )
    calls = [
        _call(role="planner", attempt=0, raw_response=body({"content": '{"plan": 1}'})),
        _call(role="executor", raw_response="upstream 502", status="error"),
        _call(role="executor", raw_response=tool_turn),
        _call(role="executor", raw_response=body({"content": '{"claims": []}'})),
        _call(role="verifier", raw_response=body({"content": '{"decision": "PASS"}'})),
    ]
    turns = scripted_turns(calls=calls, invocations=[])
    assert turns["planner"] == [{"content": '{"plan": 1}'}]
    assert turns["executor"] == [
        {"tool_calls": [{"name": "query_logs", "arguments": {"service": "payment-service"}}]},
        {"content": '{"claims": []}'},
    ]
    assert turns["verifier"] == [{"content": '{"decision": "PASS"}'}]


def test_a_final_failed_call_is_exported_as_an_empty_turn_that_fails_again():
    calls = [_call(role="composer", raw_response="", status="timeout", provider="offline")]
    assert scripted_turns(calls=calls, invocations=[])["composer"] == [{"content": ""}]


# --- audit events ------------------------------------------------------------------------


def test_export_case_writes_the_pack_and_an_audit_event(make_session, tmp_path):
    session = make_session()
    out = io.StringIO()
    call_command("export_case", str(session.public_id), str(tmp_path), stdout=out)
    folder = tmp_path / f"case-{session.public_id.hex[:12]}"
    assert out.getvalue().strip() == str(folder)
    assert (folder / "scenario.yaml").is_file()
    assert (folder / "recorded" / "invocations.jsonl").is_file()
    event = AuditEvent.objects.get()
    assert (event.actor, event.actor_label, event.action, event.target_id) == (
        None,
        "system",
        "session_exported",
        str(session.pk),
    )
    assert event.details["destination"] == str(folder)
    assert "scenario.yaml" in event.details["files"]


def test_a_failed_export_writes_no_audit_event_and_no_pack(make_session, tmp_path, monkeypatch):
    session = make_session()

    def broken(pack, folder):
        raise OSError("disk full")

    monkeypatch.setattr("audit.services._write_pack", broken)
    with pytest.raises(OSError):
        session_export(session=session, actor=None, out_dir=tmp_path)
    assert not AuditEvent.objects.exists()
    assert list(tmp_path.iterdir()) == []


def test_the_admin_action_downloads_a_zip_of_packs_and_audits_each_export(
    client, reviewer, make_session
):
    first, second = make_session(), make_session()
    client.force_login(reviewer)
    response = client.post(
        reverse("admin:diagnosis_diagnosissession_changelist"),
        {"action": "export_cases", "_selected_action": [first.pk, second.pk]},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    for session in (first, second):
        assert f"case-{session.public_id.hex[:12]}/scenario.yaml" in names
    events = AuditEvent.objects.filter(action="session_exported")
    assert sorted(int(e.target_id) for e in events) == sorted([first.pk, second.pk])
    assert {e.actor for e in events} == {reviewer}


def test_a_plain_sre_user_cannot_export(client, owner, make_session):
    session = make_session()
    client.force_login(owner)
    response = client.post(
        reverse("admin:diagnosis_diagnosissession_changelist"),
        {"action": "export_cases", "_selected_action": [session.pk]},
    )
    assert response.status_code == 302
    assert not AuditEvent.objects.exists()


# --- export then evaluate reproduces the session -------------------------------------------


def _allowed(session: DiagnosisSession) -> list[tuple[str, str]]:
    claims = (session.self_evaluation.get("composer_input") or {}).get("allowed_claims", [])
    return [(c["claim_id"], c["text"]) for c in claims]


def _evaluate(folder: Path, tmp_path: Path) -> tuple[dict, DiagnosisSession]:
    report_path = tmp_path / "report.json"
    call_command(
        "evaluate",
        str(folder),
        "--provider",
        "scripted",
        "--json",
        str(report_path),
        stdout=io.StringIO(),
    )
    [result] = json.loads(report_path.read_text(encoding="utf-8"))["packs"]
    return result, DiagnosisSession.objects.get(public_id=result["session_id"])


def _assert_replayed(original: DiagnosisSession, tmp_path: Path) -> DiagnosisSession:
    folder = session_export(session=original, actor=None, out_dir=tmp_path / "cases")
    result, replay = _evaluate(folder, tmp_path)
    assert result["status"] == "completed", result
    assert result["decision_ok"] is True and result["answer_source_ok"] is True
    assert replay.decision == original.decision
    assert replay.answer_source == original.answer_source
    assert _allowed(replay) == _allowed(original)
    assert list(replay.invocations.values_list("trace_ref", "tool_name", "status")) == list(
        original.invocations.values_list("trace_ref", "tool_name", "status")
    )
    return replay


def test_an_offline_session_exported_then_evaluated_gives_the_same_decision_and_claims(
    tmp_path,
):
    from diagnosis.evidence.services import environments_sync_from_packs

    [environment] = [
        e
        for e in environments_sync_from_packs(dirs=[settings.BASE_DIR / "scenarios"])
        if e.slug == "payment-pool-saturation"
    ]
    session = diagnosis_submit(
        question=QUESTION, environment=environment, provider="offline", enqueue=False
    )
    original = diagnosis_run(session_id=session.id)
    assert original.status == "completed" and _allowed(original)
    _assert_replayed(original, tmp_path)


def test_a_scripted_session_with_a_retry_replays_to_the_same_outcome(tmp_path, owner):
    environment = Environment.objects.create(
        slug="mini-pool",
        name="mini",
        pack_path=str(MINI_PACK),
        services=["payment-service", "order-service", "mysql"],
    )
    provider = ScriptedProvider(
        {
            "planner": [PLANNER],
            "executor": [
                QUERY_LOGS,
                executor_json(log_claim(excerpt="invented excerpt that is nowhere")),
                # (gatekeeper_v2: the service the claim names is bound by this argument)
                {
                    "tool_calls": [
                        {
                            "name": "query_logs",
                            "arguments": {"level": "ERROR", "service": "payment-service"},
                        }
                    ]
                },
                executor_json(log_claim(trace="trace-2")),
            ],
            "verifier": [
                verifier_json("RETRY"),
                verifier_json("PASS", **{"claim-1": "direct_observation"}),
            ],
            "composer": [composer_json("**结论**\n\npayment-service 出现连接池超时日志。\n")],
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(selection, "agents_for_session", lambda **kw: dict.fromkeys(Role, provider))
        session = diagnosis_submit(
            question=QUESTION, environment=environment, owner=owner, enqueue=False
        )
        original = diagnosis_run(session_id=session.id)
    assert original.attempt_count == 2 and original.decision == "PASS"
    assert _allowed(original) == [("claim-1", "payment-service 出现连接池超时日志")]
    replay = _assert_replayed(original, tmp_path)
    assert replay.attempt_count == 2
    assert list(
        ToolInvocation.objects.filter(session=replay).values_list("attempt", flat=True)
    ) == [
        1,
        2,
    ]


def test_the_admin_action_does_not_export_a_running_session(client, reviewer, make_session):
    session = make_session()
    DiagnosisSession.objects.filter(pk=session.pk).update(status="running")
    client.force_login(reviewer)
    response = client.post(
        reverse("admin:diagnosis_diagnosissession_changelist"),
        {"action": "export_cases", "_selected_action": [session.pk]},
    )
    assert response.status_code == 302
    assert not AuditEvent.objects.exists()


def test_an_id_naming_another_invocation_than_the_trace_ref_stays_a_mismatch(make_session):
    session = make_session()
    logs = ToolInvocation.objects.get(session=session, trace_ref="trace-1")
    call = LLMCall.objects.get(session=session, role="executor")
    output = json.loads(call.raw_response)
    # claim-2 cites trace-2 but names trace-1's invocation: the Gatekeeper demotes it.
    output["claims"][1]["evidence_bindings"][0]["source_invocation_ids"] = [logs.id]
    call.raw_response = json.dumps(output, ensure_ascii=False)
    call.save(update_fields=["raw_response"])
    final = json.loads(
        json.loads(case_pack_build(session=session).files["scripted/executor-2.json"])["content"]
    )
    bindings = [c["evidence_bindings"][0] for c in final["claims"]]
    assert bindings[0]["source_invocation_ids"] == []  # names the invocation of its trace ref
    # Emptied, it would pass in the replay; a replay can never hold this id.
    assert bindings[1]["source_invocation_ids"] == [NON_MATCHING_ID]
    assert bindings[1]["source_id"] == "trace-2"


# --- a session restarted after its worker died -------------------------------------------


class WorkerDied(BaseException):
    """The worker process dies: nothing in the flow catches it, the session stays running."""


class _DiesAfterExecuting:
    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def answer(self, role, request, *, recorder, tools=None):
        answer = self.inner.answer(role, request, recorder=recorder, tools=tools)
        if role == Role.EXECUTOR:
            raise WorkerDied
        return answer


class _CitesInvocationIds(ScriptedProvider):
    """Scripted, but the Executor's final answer is built from the ids of its own calls."""

    def __init__(self, script, *, answer, calls: int) -> None:
        super().__init__(script)
        self.final, self.calls, self.made = answer, calls, []

    def answer(self, role, request, *, recorder, tools=None):
        if role != Role.EXECUTOR:
            return super().answer(role, request, recorder=recorder, tools=tools)

        def run(name, arguments):
            result = tools(name, arguments)
            self.made.append(result)
            if len(self.made) == self.calls:
                self._turns[Role.EXECUTOR].append({"content": self.final(self.made)})
            return result

        return super().answer(role, request, recorder=recorder, tools=run)


def _binding(trace: str, ids: list[int]) -> dict:
    return {
        "source_type": "tool_trace",
        "source_id": trace,
        "tool_name": "query_logs",
        "source_invocation_ids": ids,
        "evidence_excerpt": EXCERPT,
    }


def test_a_session_restarted_after_its_worker_died_replays_only_the_surviving_run(tmp_path, owner):
    import socket

    environment = Environment.objects.create(
        slug="mini-pool",
        name="mini",
        pack_path=str(MINI_PACK),
        services=["payment-service", "order-service", "mysql"],
    )
    dead_claim = log_claim(text="死掉的运行说的结论")
    dying = _DiesAfterExecuting(
        ScriptedProvider(
            {"planner": [PLANNER], "executor": [QUERY_LOGS, executor_json(dead_claim)]}
        )
    )
    session = diagnosis_submit(
        question=QUESTION, environment=environment, owner=owner, enqueue=False
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(selection, "agents_for_session", lambda **kw: dict.fromkeys(Role, dying))
        with pytest.raises(WorkerDied):
            diagnosis_run(session_id=session.id)
    # Attempt 1 made its calls and never finished; its worker is gone.
    DiagnosisSession.objects.filter(pk=session.pk).update(
        runner=f"{socket.gethostname()}:999999999"
    )

    def answer(made):
        first, second = made  # trace-2 (level=ERROR) and trace-3 (service=payment-service)
        kept = log_claim(trace=second.trace_ref)
        kept["evidence_bindings"] = [_binding(second.trace_ref, [second.invocation_id])]
        mismatched = log_claim(claim_id="claim-2", text="payment-service 日志里有错误")
        # Its excerpt holds in trace-2, but it names trace-3's invocation: demoted.
        mismatched["evidence_bindings"] = [_binding(first.trace_ref, [second.invocation_id])]
        return executor_json(kept, mismatched)["content"]

    surviving = _CitesInvocationIds(
        {
            "planner": [PLANNER],
            "executor": [
                {
                    "tool_calls": [
                        {"name": "query_logs", "arguments": {"level": "ERROR"}},
                        {"name": "query_logs", "arguments": {"service": "payment-service"}},
                    ]
                }
            ],
            "verifier": [
                verifier_json(
                    "PASS",
                    **{"claim-1": "direct_observation", "claim-2": "direct_observation"},
                )
            ],
            "composer": [composer_json("**结论**\n\npayment-service 出现连接池超时日志。\n")],
        },
        answer=answer,
        calls=2,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(selection, "agents_for_session", lambda **kw: dict.fromkeys(Role, surviving))
        original = diagnosis_run(session_id=session.id)
    assert original.status == "completed" and original.restarts == 1
    assert original.self_evaluation["restarts"][0]["previous_attempts"] == 1
    assert original.attempt_count == 2 and original.decision == "LOW_CONFID"  # claim-2 demoted
    assert _allowed(original) == [("claim-1", "payment-service 出现连接池超时日志")]
    verdicts = [c["verdict"] for c in original.self_evaluation["gatekeeper"]["claims"]]
    assert verdicts == ["accepted", "demoted"]
    assert list(original.invocations.values_list("attempt", "trace_ref")) == [
        (1, "trace-1"),
        (2, "trace-2"),
        (2, "trace-3"),
    ]

    pack = case_pack_build(session=original)
    assert "死掉的运行" not in "".join(pack.files.values())
    recorded = [json.loads(line) for line in pack.files["recorded/invocations.jsonl"].splitlines()]
    assert [r["arguments"] for r in recorded] == [
        {"level": "ERROR"},
        {"service": "payment-service"},
    ]
    assert sorted(p for p in pack.files if p.startswith("scripted/")) == [
        "scripted/composer.json",
        "scripted/executor-1.json",
        "scripted/executor-2.json",
        "scripted/planner.json",
        "scripted/verifier.json",
    ]
    final = json.loads(json.loads(pack.files["scripted/executor-2.json"])["content"])
    bindings = [c["evidence_bindings"][0] for c in final["claims"]]
    # The replay numbers its own calls from trace-1.
    assert [(b["source_id"], b["source_invocation_ids"]) for b in bindings] == [
        ("trace-2", []),
        ("trace-1", [NON_MATCHING_ID]),
    ]

    folder = session_export(session=original, actor=None, out_dir=tmp_path / "cases")
    result, replay = _evaluate(folder, tmp_path)
    assert result["status"] == "completed", result
    assert result["decision_ok"] is True and result["answer_source_ok"] is True
    assert replay.decision == original.decision
    assert replay.answer_source == original.answer_source
    assert _allowed(replay) == _allowed(original)
    verdicts = [c["verdict"] for c in replay.self_evaluation["gatekeeper"]["claims"]]
    assert verdicts == ["accepted", "demoted"]
    assert list(replay.invocations.values_list("attempt", "trace_ref", "tool_name")) == [
        (1, "trace-1", "query_logs"),
        (1, "trace-2", "query_logs"),
    ]
