"""Reads of the diagnosis domain."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection
from django.utils.translation import gettext
from pydantic import ValidationError

from diagnosis.contracts import SelfEvaluation
from diagnosis.models import DiagnosisSession
from diagnosis.services import FAILURE_CODES


@dataclass(frozen=True)
class ComponentHealth:
    ok: bool
    detail: str


def database_health() -> ComponentHealth:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return ComponentHealth(ok=False, detail=type(exc).__name__)
    return ComponentHealth(ok=True, detail=connection.vendor)


def broker_health(*, timeout: float = 2.0) -> ComponentHealth:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            transport = conn.transport_cls
    except Exception as exc:
        return ComponentHealth(ok=False, detail=type(exc).__name__)
    return ComponentHealth(ok=True, detail=str(transport))


def session_failure_code(*, session: DiagnosisSession) -> str:
    """The stable failure code of a failed session ("" otherwise), for API clients."""
    if session.status != DiagnosisSession.Status.FAILED:
        return ""
    code = session.error.partition(":")[0]
    return code if code in FAILURE_CODES else "internal_error"


def session_failure_message(*, session: DiagnosisSession) -> str:
    """What users and API clients learn of a failed run: never the exception itself.

    The exception text stays in ``session.error`` for reviewers (admin, audit).
    """
    if session.status != DiagnosisSession.Status.FAILED:
        return ""
    return gettext(
        "诊断在运行中出错，没有得出任何经过证据校验的结论。请稍后重试；审计页面为审核人员记录了失败原因。"
    )


# --- Claims as a reader sees them (chat evidence view, API, admin, CLI) -------


@dataclass(frozen=True)
class BindingView:
    source_type: str
    source_id: str
    tool_name: str
    excerpt: str
    invocation_id: int | None
    valid: bool
    index: int = -1  # the binding's index as the model wrote it (what findings and facts cite)


@dataclass(frozen=True)
class ClaimView:
    claim_id: str
    text: str
    claim_type: str
    entity: str
    support_level: str
    verdict: str  # gatekeeper: accepted / demoted / "" when unknown
    findings: list[dict]
    classification: str  # verifier; "" when the Verifier gave none
    reason: str
    placement: str  # allowed_claim / hypothesis / missing_info / evidence_gap / dropped
    bindings: list[BindingView]
    # gatekeeper_v2: each fact of the text, its span and the binding that binds it ([] for v1)
    facts: list[dict] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return self.placement == "allowed_claim"

    def as_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


def session_claims_view(*, session) -> list[ClaimView]:
    """Every claim of the last attempt with what the Gatekeeper and Verifier said of it."""
    evaluation = session.self_evaluation or {}
    structured = session.executor_structured_output or {}
    gatekeeper = {
        c.get("claim_id"): c
        for c in (evaluation.get("gatekeeper") or {}).get("claims", [])
        if isinstance(c, dict)
    }
    verifier = evaluation.get("verifier_evaluation") or {}
    checks = {c.get("claim_id"): c for c in verifier.get("claim_checks", []) if isinstance(c, dict)}
    placements = verifier.get("placements") or {}
    invocation_ids = dict(session.invocations.values_list("trace_ref", "id"))
    views = []
    claims = structured.get("claims") if isinstance(structured, dict) else None
    for claim in claims if isinstance(claims, list) else []:
        if not isinstance(claim, dict):
            continue
        claim_id = str(claim.get("claim_id", ""))
        gate = gatekeeper.get(claim_id, {})
        bad_bindings = {f.get("binding") for f in gate.get("findings", []) if isinstance(f, dict)}
        bindings = []
        raw_bindings = claim.get("evidence_bindings")
        for index, binding in enumerate(raw_bindings if isinstance(raw_bindings, list) else []):
            if not isinstance(binding, dict):
                continue
            source_id = str(binding.get("source_id", ""))
            bindings.append(
                BindingView(
                    source_type=str(binding.get("source_type", "")),
                    source_id=source_id,
                    tool_name=str(binding.get("tool_name") or ""),
                    excerpt=str(binding.get("evidence_excerpt") or ""),
                    invocation_id=invocation_ids.get(source_id),
                    valid=gate.get("verdict") == "accepted" and index not in bad_bindings,
                    index=index,
                )
            )
        check = checks.get(claim_id, {})
        views.append(
            ClaimView(
                claim_id=claim_id,
                text=str(claim.get("claim_text", "")),
                claim_type=str(claim.get("claim_type", "")),
                entity=str(claim.get("entity") or ""),
                support_level=str(claim.get("support_level", "")),
                verdict=str(gate.get("verdict", "")),
                findings=[f for f in gate.get("findings", []) if isinstance(f, dict)],
                classification=str(check.get("classification", "")),
                reason=str(check.get("reason", "")),
                placement=str(placements.get(claim_id, "")),
                bindings=bindings,
                facts=[f for f in gate.get("facts") or [] if isinstance(f, dict)],
            )
        )
    return views


def session_composer_input(*, session):
    """The filtered material the Composer was given (ComposerInput), or None."""
    from pydantic import ValidationError

    from diagnosis.contracts import ComposerInput

    raw = (session.self_evaluation or {}).get("composer_input")
    if not isinstance(raw, dict):
        return None
    try:
        return ComposerInput.model_validate(raw)
    except ValidationError:
        return None


def session_self_evaluation(session: DiagnosisSession) -> SelfEvaluation:
    """The session's audit record, typed; a malformed stored part reads as absent.

    The one reader of ``DiagnosisSession.self_evaluation`` (its writer is
    ``diagnosis.services.session_self_evaluation_save``).
    """
    stored = session.self_evaluation if isinstance(session.self_evaluation, dict) else {}
    try:
        return SelfEvaluation.model_validate(stored)
    except ValidationError:
        pass
    kept: dict[str, object] = {}
    for name in SelfEvaluation.model_fields:
        if name not in stored:
            continue
        try:
            SelfEvaluation.model_validate({name: stored[name]})
        except ValidationError:
            continue  # one unreadable part (an old or hand-edited row) hides only itself
        kept[name] = stored[name]
    return SelfEvaluation.model_validate(kept)
