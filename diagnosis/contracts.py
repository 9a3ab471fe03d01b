"""The JSON contracts between the stages (docs/contracts.md).

Parsing is tolerant (see ``diagnosis.flow.parsing``), validation is strict. Each
contract carries its version string. Models that hold model-produced data use
``extra="allow"`` so unknown keys survive for the audit trail without being
trusted; the Gatekeeper decides what counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

EXECUTOR_V1: Final = "executor_evidence_v1"
EXECUTOR_V2: Final = "executor_evidence_v2"
GATEKEEPER_V1: Final = "gatekeeper_v1"
GATEKEEPER_V2: Final = "gatekeeper_v2"
VERIFIER_V2: Final = "verifier_v2"
COMPOSER_V1: Final = "composer_v1"


class ParseStatus(StrEnum):
    PARSED_V2 = "parsed_v2"
    PARSED_V1 = "parsed_v1"
    EMPTY = "empty"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    SCHEMA_INVALID = "schema_invalid"
    # cut by max_tokens before the top-level object closed (finish_reason "length")
    TRUNCATED = "truncated"


class ClaimType(StrEnum):
    SYMPTOM = "symptom"
    ROOT_CAUSE = "root_cause"
    CONTRIBUTING_FACTOR = "contributing_factor"
    IMPACT = "impact"
    TIMELINE = "timeline"
    CONFIGURATION = "configuration"
    OTHER = "other"


class SupportLevel(StrEnum):
    DIRECT = "direct"
    INDIRECT = "indirect"
    NONE = "none"


class SourceType(StrEnum):
    TOOL_TRACE = "tool_trace"
    LOOKUP_EVIDENCE_BLOCK = "lookup_evidence_block"


class Decision(StrEnum):
    PASS = "PASS"  # noqa: S105
    RETRY = "RETRY"
    LOW_CONFID = "LOW_CONFID"
    REJECT = "REJECT"


class Classification(StrEnum):
    DIRECT_OBSERVATION = "direct_observation"
    REASONABLE_INFERENCE = "reasonable_inference"
    OVERSTATED = "overstated"
    UNSUPPORTED = "unsupported"
    EXTERNAL_UNKNOWN = "external_unknown"
    CONTRADICTED = "contradicted"


# The classifications under which a (Gatekeeper-accepted) claim may be stated as fact.
ALLOWED_CLASSIFICATIONS = frozenset(
    {Classification.DIRECT_OBSERVATION, Classification.REASONABLE_INFERENCE}
)


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    DEMOTED = "demoted"


class FindingCode(StrEnum):
    NO_BINDINGS = "no_bindings"
    UNKNOWN_SOURCE_ID = "unknown_source_id"
    INVOCATION_NOT_IN_SESSION = "invocation_not_in_session"
    TOOL_NAME_MISMATCH = "tool_name_mismatch"
    INVOCATION_FAILED = "invocation_failed"
    EXCERPT_NOT_FOUND = "excerpt_not_found"
    EXCERPT_TOO_SHORT = "excerpt_too_short"
    NUMBER_MISMATCH = "number_mismatch"
    KNOWLEDGE_ONLY_BINDING = "knowledge_only_binding"
    DUPLICATE_CLAIM_ID = "duplicate_claim_id"
    UNKNOWN_CLAIM_TYPE = "unknown_claim_type"
    MALFORMED_CLAIM = "malformed_claim"
    MALFORMED_BINDING = "malformed_binding"
    MALFORMED_ITEM = "malformed_item"
    SOURCE_ID_MISMATCH = "source_id_mismatch"
    UNKNOWN_SOURCE_TYPE = "unknown_source_type"
    # gatekeeper_v2
    FRAGMENT_TOO_SHORT = "fragment_too_short"
    TOO_MANY_FRAGMENTS = "too_many_fragments"
    FRAGMENTS_TOO_FAR_APART = "fragments_too_far_apart"
    INVALID_BINDING_BESIDE_VALID = "invalid_binding_beside_valid"
    CLAIM_FACT_UNBOUND = "claim_fact_unbound"
    CLAIM_NOT_SPECIFIC = "claim_not_specific"
    EXCERPT_IS_INSTRUCTION = "excerpt_is_instruction"
    # Rootproof additions (claim-level): a stated root_cause_kind none of its excerpts shows
    KIND_UNBOUND = "kind_unbound"
    # Rootproof additions (report-level): a hypothesis's kind no tool output about its
    # service shows (its kind is dropped, the hypothesis kept)
    HYPOTHESIS_KIND_UNSHOWN = "hypothesis_kind_unshown"
    # a fact of a hypothesis's text or basis that no output of the session holds
    HYPOTHESIS_FACT_UNBOUND = "hypothesis_fact_unbound"
    # Rootproof additions (report-level, see diagnosis.flow.parsing / diagnosis.flow.gatekeeper)
    UNKNOWN_ANSWER_VERSION = "unknown_answer_version"
    UNUSABLE_OUTPUT = "unusable_output"
    INTERNAL_ERROR = "internal_error"


# A claim demoted with one of these had invented or wrong evidence: it never becomes a
# hypothesis and never reaches the conclusion; it is a gap worded by the evidence it lacks.
EVIDENCE_FAILURE_CODES = frozenset(
    {
        FindingCode.NO_BINDINGS,
        FindingCode.UNKNOWN_SOURCE_ID,
        FindingCode.INVOCATION_NOT_IN_SESSION,
        FindingCode.SOURCE_ID_MISMATCH,
        FindingCode.UNKNOWN_SOURCE_TYPE,
        FindingCode.TOOL_NAME_MISMATCH,
        FindingCode.INVOCATION_FAILED,
        FindingCode.EXCERPT_NOT_FOUND,
        FindingCode.EXCERPT_TOO_SHORT,
        FindingCode.FRAGMENT_TOO_SHORT,
        FindingCode.TOO_MANY_FRAGMENTS,
        FindingCode.FRAGMENTS_TOO_FAR_APART,
        FindingCode.NUMBER_MISMATCH,
        FindingCode.MALFORMED_BINDING,
        FindingCode.INVALID_BINDING_BESIDE_VALID,
        FindingCode.CLAIM_FACT_UNBOUND,
        FindingCode.EXCERPT_IS_INSTRUCTION,
        FindingCode.INTERNAL_ERROR,
    }
)


# --- 1. Executor output -------------------------------------------------------


class EvidenceBinding(BaseModel):
    """Where a claim's evidence is: an invocation (trace ref) or a knowledge chunk."""

    model_config = ConfigDict(extra="allow")

    source_type: str = Field(
        description="tool_trace or lookup_evidence_block",
        json_schema_extra={"enum": [t.value for t in SourceType]},
    )
    source_id: str = Field(description="trace_ref (trace-N) or knowledge chunk id")
    tool_name: str | None = Field(default=None, description="the invocation's tool, if given")
    source_invocation_ids: list[int] = Field(
        default_factory=list, description="persisted tool_invocation ids; optional"
    )
    evidence_excerpt: str = Field(default="", description="verbatim text from the tool output")


class Claim(BaseModel):
    model_config = ConfigDict(extra="allow")

    claim_id: str
    claim_type: str = Field(
        description="one of ClaimType; anything else is kept as other",
        # the schema a grammar compiles offers only the real types (parsing stays tolerant)
        json_schema_extra={"enum": [t.value for t in ClaimType if t is not ClaimType.OTHER]},
    )
    claim_text: str
    entity: str | None = Field(default=None, description="service or component the claim is about")
    root_cause_kind: str | None = Field(
        default=None,
        description="for a root-cause claim: cpu, memory, disk, network, latency, errors, code, "
        "configuration, dependency or resource_exhaustion",
    )
    root_cause_kind_alternative: str | None = Field(
        default=None,
        description="the one other kind the evidence cannot tell root_cause_kind from, if any",
    )
    support_level: str = Field(
        default=SupportLevel.DIRECT.value,
        json_schema_extra={"enum": [s.value for s in SupportLevel]},
    )
    evidence_bindings: list[EvidenceBinding] = Field(default_factory=list)


class Hypothesis(BaseModel):
    model_config = ConfigDict(extra="allow")

    hypothesis_text: str
    entity: str | None = None
    root_cause_kind: str | None = None  # as on Claim
    root_cause_kind_alternative: str | None = None  # as on Claim: one kind, never a list
    basis: str = ""
    needed_evidence: list[str] = Field(default_factory=list)


class RecommendedAction(BaseModel):
    model_config = ConfigDict(extra="allow")

    action_text: str
    reason: str = ""
    evidence_bindings: list[EvidenceBinding] = Field(default_factory=list)


class ExecutorEvidenceV2(BaseModel):
    model_config = ConfigDict(extra="allow")

    answer_version: Literal["executor_evidence_v2"] = EXECUTOR_V2
    claims: list[Claim] = Field(default_factory=list)
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    recommended_actions: list[RecommendedAction] = Field(default_factory=list)
    missing_info: list[str] = Field(default_factory=list)


class ExecutorEvidenceV1(ExecutorEvidenceV2):
    """Legacy v1: also parsed, but its ``user_facing_answer`` is never shown to a user."""

    answer_version: Literal["executor_evidence_v1"] = EXECUTOR_V1  # type: ignore[assignment]
    diagnosis_summary: str = ""
    user_facing_answer: str = ""


# --- 2. Gatekeeper ------------------------------------------------------------


class Finding(BaseModel):
    code: str
    binding: int | None = Field(default=None, description="index of the binding, if any")
    detail: str = ""
    fact: str | None = Field(default=None, description="the claim's fact, for claim_fact_unbound")
    # ``detail`` as a stable code and its parameters, so a page words it in its own language;
    # findings recorded before these fields (and parse findings) carry ``detail`` only
    # (left out of a dump when unset, so a finding without them reads as it always did)
    detail_code: str | None = Field(
        default=None,
        description="the wording of detail, as a code",
        exclude_if=lambda value: value is None,
    )
    detail_params: dict[str, str | int | list[int]] = Field(
        default_factory=dict,
        description="the numbers, ids and names detail names",
        exclude_if=lambda value: not value,
    )


class ClaimFact(BaseModel):
    """One fact of a claim's text (gatekeeper_v2) and what binds it."""

    text: str = Field(description="the fact as the claim writes it")
    kind: str = Field(description="number, time, date, identifier or service")
    start: int = Field(default=0, description="span in claim_text")
    end: int = 0
    binding: int | None = Field(default=None, description="index of the binding that binds it")
    via: Literal["excerpt", "argument"] | None = Field(
        default=None, description="bound by the binding's excerpt or its invocation's arguments"
    )


class GatekeeperClaimResult(BaseModel):
    claim_id: str
    verdict: Verdict
    valid_bindings: int = 0
    findings: list[Finding] = Field(default_factory=list)
    facts: list[ClaimFact] = Field(default_factory=list, description="gatekeeper_v2 only")


class GatekeeperCounts(BaseModel):
    claims: int = 0
    accepted: int = 0
    demoted: int = 0


class GatekeeperReport(BaseModel):
    # stored sessions keep their gatekeeper_v1 reports, which read the same
    gatekeeper_version: Literal["gatekeeper_v1", "gatekeeper_v2"] = GATEKEEPER_V2
    parse_status: ParseStatus
    claims: list[GatekeeperClaimResult] = Field(default_factory=list)
    findings: list[Finding] = Field(
        default_factory=list, description="findings about the output as a whole or dropped items"
    )
    counts: GatekeeperCounts = Field(default_factory=GatekeeperCounts)

    def verdict_for(self, claim_id: str) -> Verdict | None:
        for result in self.claims:
            if result.claim_id == claim_id:
                return result.verdict
        return None

    def result_for(self, claim_id: str) -> GatekeeperClaimResult | None:
        for result in self.claims:
            if result.claim_id == claim_id:
                return result
        return None


# --- 3. Verifier --------------------------------------------------------------


class TraceSummaryEntry(BaseModel):
    trace_ref: str
    invocation_id: int
    tool_name: str
    arguments: Any = None
    status: str
    summary: str


class VerifierPayload(BaseModel):
    """Exactly what the Verifier may see; nothing of Planner or Executor reasoning."""

    model_config = ConfigDict(extra="forbid")

    original_query: str
    executor_final_answer: str
    executor_structured_output: dict[str, Any] | None
    executor_output_parse_status: ParseStatus
    gatekeeper: GatekeeperReport
    tool_trace_summary: list[TraceSummaryEntry]
    retry_context: dict[str, Any] | None = None


class ClaimCheck(BaseModel):
    model_config = ConfigDict(extra="allow")

    claim_id: str
    classification: Classification
    reason: str = ""
    bounded_wording: str | None = None


class RetryRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    missing_evidence: list[str] = Field(default_factory=list)
    instructions: str = ""


class VerifierOutput(BaseModel):
    model_config = ConfigDict(extra="allow")

    verifier_version: Literal["verifier_v2"] = VERIFIER_V2
    decision: Decision
    claim_checks: list[ClaimCheck] = Field(default_factory=list)
    extra_facts: list[str] = Field(default_factory=list)
    retry_request: RetryRequest | None = None
    summary: str = ""


# --- 4. Composer --------------------------------------------------------------


class Wording(StrEnum):
    DEFINITE = "definite"
    BOUNDED = "bounded"


class AllowedClaim(BaseModel):
    claim_id: str
    text: str
    wording: Wording
    entity: str | None = None
    claim_type: str = ClaimType.OTHER.value
    root_cause_kind: str | None = None
    root_cause_kind_alternative: str | None = None


class AllowedHypothesis(BaseModel):
    text: str
    basis: str = ""
    entity: str | None = None
    # set when the hypothesis is a claim the Verifier found overstated; None for the
    # Executor's own hypotheses (only those, with a basis, may lead the conclusion)
    claim_id: str | None = None
    root_cause_kind: str | None = None
    root_cause_kind_alternative: str | None = None


class ComposerAction(BaseModel):
    text: str
    reason: str = ""


class Certainty(StrEnum):
    """How sure an answer is of its root cause: ONE decision per answer.

    The badge (``root_cause_status``), the conclusion's opening and the section a
    root-cause statement sits in all read it (chat, API, audit, callbacks).
    """

    CONFIRMED = "confirmed"  # a root-cause claim accepted as a direct observation
    INFERRED = "inferred"  # accepted, but classed a reasonable inference (bounded)
    HYPOTHESISED = "hypothesised"  # only hypotheses stand
    UNDETERMINED = "undetermined"  # neither


CAUSE_CLAIM_TYPES = frozenset({ClaimType.ROOT_CAUSE.value, ClaimType.CONTRIBUTING_FACTOR.value})


class ComposerInput(BaseModel):
    """Built by code from the Gatekeeper and Verifier results only."""

    decision: Decision
    language: str = "zh-CN"
    question: str
    allowed_claims: list[AllowedClaim] = Field(default_factory=list)
    allowed_hypotheses: list[AllowedHypothesis] = Field(default_factory=list)
    missing_info: list[str] = Field(default_factory=list)
    recommended_actions: list[ComposerAction] = Field(default_factory=list)

    def certainty(self) -> Certainty:
        """The answer's one certainty: from the cause claims it may state, then hypotheses.

        Only a hypothesis that may lead the conclusion makes it hypothesised: the
        Executor's own (``claim_id`` unset) with a basis, and never under REJECT (whose
        answer shows no hypotheses). An overstated claim listed as a possible cause does
        not: its own evidence said less than it did.
        """
        causes = [c for c in self.allowed_claims if c.claim_type in CAUSE_CLAIM_TYPES]
        if any(c.wording == Wording.DEFINITE for c in causes):
            return Certainty.CONFIRMED
        if causes:
            return Certainty.INFERRED
        if self.decision != Decision.REJECT and any(
            h.claim_id is None and h.basis.strip() for h in self.allowed_hypotheses
        ):
            return Certainty.HYPOTHESISED
        return Certainty.UNDETERMINED


class ComposerOutput(BaseModel):
    answer_version: Literal["composer_v1"] = COMPOSER_V1
    final_answer: str


class ComposerStatus(StrEnum):
    OK = "ok"
    MALFORMED = "malformed"
    GUARD_FAILED = "guard_failed"
    INCOHERENT = "incoherent"  # the answer contradicts itself (diagnosis.flow.coherence)
    ERROR = "error"


class AnswerSource(StrEnum):
    COMPOSER = "composer"
    FALLBACK = "fallback"


class CoherenceCode(StrEnum):
    BADGE_CONCLUSION_MISMATCH = "badge_conclusion_mismatch"
    STACKED_HEDGES = "stacked_hedges"
    HEDGED_CONFIRMATION = "hedged_confirmation"
    SERIES_TWO_FIGURES = "series_two_figures"
    PEAK_BEFORE_ONSET = "peak_before_onset"
    KIND_WITHOUT_EVIDENCE = "kind_without_evidence"


class CoherenceFinding(BaseModel):
    """One way an answer contradicts itself; ``excerpt`` is the answer text at fault."""

    code: CoherenceCode
    excerpt: str = ""


class ComposerOutputSnapshot(BaseModel):
    """Audit snapshot at self_evaluation.verifier_evaluation.composer_output."""

    status: ComposerStatus
    source: AnswerSource
    final_answer: str
    guard_findings: list[str] = Field(default_factory=list)
    # the coherence check (diagnosis.flow.coherence): of the Composer's answer when it was
    # re-rendered for them, and of the answer finally shown (none expected)
    composer_coherence: list[CoherenceFinding] = Field(default_factory=list)
    coherence_findings: list[CoherenceFinding] = Field(default_factory=list)
    certainty: Certainty | None = None


# --- Planner (Rootproof-internal) -------------------------------------------


class TimeWindow(BaseModel):
    start: str = Field(description="RFC 3339")
    end: str = Field(description="RFC 3339")


class PlannerOutput(BaseModel):
    """The Planner's plan: where to look and with which tools."""

    model_config = ConfigDict(extra="allow")

    plan_version: Literal["planner_v1"] = "planner_v1"
    services: list[str] = Field(default_factory=list)
    window: TimeWindow | None = None
    symptoms: list[str] = Field(default_factory=list, description="what the SRE reports")
    focus: list[str] = Field(default_factory=list, description="what to look for")
    tools: list[str] = Field(default_factory=list)
    notes: str = ""


# --- What a session records about itself (self_evaluation) ------------------


class Lenient(BaseModel):
    """A stored record: unknown keys survive, a missing key takes its default."""

    model_config = ConfigDict(extra="allow")


class Disagreement(Lenient):
    claim_id: str = ""
    verifier: str = ""
    gatekeeper: str = ""


class RouteNote(Lenient):
    """A routing note as a stable code and its parameters (what the note's text says)."""

    code: str = ""
    params: dict[str, str | int | list[str]] = Field(default_factory=dict)


class VerifierEvaluation(Lenient):
    """The Verifier's verdict as routed, and what the Composer got and gave."""

    status: str = ""
    detail: str = ""
    payload_keys: list[str] = Field(default_factory=list)
    decision: Decision | None = None
    routed_decision: Decision | None = None
    route_notes: list[str] = Field(default_factory=list)
    # route_notes[i] as a code (older rows have none): pages word the note in their language
    route_note_codes: list[RouteNote] = Field(
        default_factory=list, exclude_if=lambda value: not value
    )
    claim_checks: list[ClaimCheck] = Field(default_factory=list)
    extra_facts: list[str] = Field(default_factory=list)
    summary: str = ""
    retry_request: RetryRequest | None = None
    disagreements: list[Disagreement] = Field(default_factory=list)
    placements: dict[str, str] = Field(default_factory=dict)
    composer_output: ComposerOutputSnapshot | None = None

    def route_notes_coded(self) -> list[tuple[str, RouteNote | None]]:
        """Each routing note's text with its code (None for notes recorded before codes)."""
        codes = self.route_note_codes
        return [
            (text, codes[i] if i < len(codes) else None) for i, text in enumerate(self.route_notes)
        ]


class AttemptRecord(Lenient):
    """One Executor → Gatekeeper → Verifier pass."""

    attempt: int = 0
    executor_error: str = ""
    parse_status: ParseStatus | None = None
    gatekeeper_counts: GatekeeperCounts = Field(default_factory=GatekeeperCounts)
    verifier_status: str = ""
    verifier_decision: Decision | None = None
    routed_decision: Decision | None = None
    retry_context: dict[str, Any] | None = None
    structured_output: dict[str, Any] | None = None
    gatekeeper: GatekeeperReport | None = None


class RestartRecord(Lenient):
    """A worker took the session over after its first worker died."""

    at: str = ""
    previous_attempts: int = 0


class ScopeRecord(Lenient):
    unknown_services: list[str] = Field(default_factory=list)


class SelfEvaluation(Lenient):
    """``DiagnosisSession.self_evaluation``: the whole audit record of one run.

    Read with ``diagnosis.selectors.session_self_evaluation`` and written with
    ``diagnosis.sessions.record.session_self_evaluation_save``; nothing else touches
    the JSON. Older rows (``gatekeeper_v1``, missing keys) stay readable.
    """

    attempts: list[AttemptRecord] = Field(default_factory=list)
    gatekeeper: GatekeeperReport | None = None
    verifier_evaluation: VerifierEvaluation | None = None
    composer_input: ComposerInput | None = None
    scope: ScopeRecord | None = None
    restarts: list[RestartRecord] = Field(default_factory=list)


# --- How a run ends (diagnosis.sessions.lifecycle.session_finish) ---------------------


@dataclass(frozen=True)
class CompletedOutcome:
    """The flow reached an answer: the decision, the answer shown, the audit record."""

    decision: Decision
    answer: str
    answer_source: AnswerSource
    root_cause_status: str
    evaluation: SelfEvaluation
    llm_usage: dict[str, Any] = field(default_factory=dict)


# The stable codes of a failed session, the part of ``session.error`` API clients see.
FAILURE_CODES: Final = ("internal_error", "worker_lost", "timeout")


@dataclass(frozen=True)
class FailedOutcome:
    """The run failed: ``code`` (one of FAILURE_CODES) and the reviewer's detail."""

    error: str
    code: str = "internal_error"


@dataclass(frozen=True)
class CancelledOutcome:
    """The requester cancelled the run before it finished."""


SessionOutcome = CompletedOutcome | FailedOutcome | CancelledOutcome


class ConflictError(Exception):
    """A service's refusal because of the current state (the API answers 409 with ``code``)."""

    def __init__(self, message: str, *, code: str = "conflict") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
