"""Evaluation: run scenario packs as real sessions and score them (docs/scenario-pack.md §10)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diagnosis.contracts import Certainty, ComposerInput, Decision
from diagnosis.evidence.pack_check import pack_load
from diagnosis.evidence.packs import PackError
from diagnosis.evidence.services import environment_sync_from_pack
from diagnosis.flow.coherence import answer_coherence_check
from diagnosis.flow.run import diagnosis_run
from diagnosis.models import DiagnosisSession
from diagnosis.selectors import session_claims, session_self_evaluation
from diagnosis.services import diagnosis_submit


@dataclass
class PackResult:
    pack: str
    path: str
    session_id: str = ""
    status: str = ""
    decision: str = ""
    answer_source: str = ""
    root_cause_candidates: list[str] = field(default_factory=list)
    expected_root_cause: str | None = None
    hit_at_1: bool | None = None
    hit_at_3: bool | None = None
    expected_kind: str | None = None
    root_cause_kind: str | None = None
    # the one other kind the answer says its evidence cannot tell that kind from
    root_cause_kind_alternative: str | None = None
    kind_ok: bool | None = None  # the expected kind is the kind given, or its named alternative
    kind_strict_ok: bool | None = None  # the expected kind is the kind given
    must_mention: int = 0
    must_mention_hits: int = 0
    confirmed_mention_hits: int = 0
    leaked: int = 0
    leaked_phrases: list[str] = field(default_factory=list)
    decision_ok: bool | None = None
    # where expected.abstain: no root cause confirmed, the unobserved service named as
    # missing data or as a hypothesis
    expected_abstain: bool = False
    abstained_ok: bool | None = None
    answer_source_ok: bool | None = None
    unsupported_in_answer: int = 0
    tool_calls: int = 0
    llm_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    error: str = ""
    # the coherence check (diagnosis.flow.coherence) on the answer shown: none expected
    coherence_findings: list[str] = field(default_factory=list)


LOAD_FAILED = "load_failed"


def _rate(packs: list[PackResult], score: Callable[[PackResult], float | None]) -> float | None:
    """The mean of ``score`` over the packs it applies to (None: it does not), where a pack
    that failed to load counts in every rate as a miss: what could not be run was not found."""
    values: list[float] = []
    for p in packs:
        value = 0.0 if p.status == LOAD_FAILED else score(p)
        if value is not None:
            values.append(float(value))
    return _ratio(sum(values), len(values))


def _hit(flag: bool | None) -> float | None:
    return None if flag is None else float(flag)


WRONG_ROOT = "wrong_root"


def kind_confusion(packs: list[PackResult]) -> dict[str, dict[str, int]]:
    """expected kind -> the kind the answer gave its root -> packs ("none": no kind given, or
    a pack that failed to load; ``WRONG_ROOT``: the first candidate is not the expected root,
    so whatever kind it carries is not a kind given for the root — the same rule as
    ``kind_ok``)."""
    matrix: dict[str, dict[str, int]] = {}
    for p in packs:
        if not p.expected_kind and p.status != LOAD_FAILED:
            continue
        row = matrix.setdefault(p.expected_kind or "?", {})
        given = WRONG_ROOT if _wrong_root(p) else _given(p)
        row[given] = row.get(given, 0) + 1
    return matrix


def _given(p: PackResult) -> str:
    """The kind the answer gave, "latency|network" for a pair it cannot tell apart."""
    if not p.root_cause_kind:
        return "none"
    if p.root_cause_kind_alternative:
        return f"{p.root_cause_kind}|{p.root_cause_kind_alternative}"
    return p.root_cause_kind


def _wrong_root(p: PackResult) -> bool:
    return p.status != LOAD_FAILED and bool(p.expected_root_cause) and not p.hit_at_1


def _folder(p: PackResult) -> str:
    return str(Path(p.path).parent)


# The headline rates each folder of packs is given (``EvaluationReport.folders``).
FOLDER_RATES = (
    "packs",
    "ac_at_1",
    "ac_at_3",
    "kind_accuracy",
    "kind_accuracy_strict",
    "abstained_ok",
    "leaks",
    "failed",
)


@dataclass
class EvaluationReport:
    packs: list[PackResult]

    @property
    def totals(self) -> dict[str, Any]:
        return _totals(self.packs)

    @property
    def folders(self) -> dict[str, dict[str, Any]]:
        """The headline rates of each folder of packs, so one set cannot hide another."""
        groups: dict[str, list[PackResult]] = {}
        for p in self.packs:
            groups.setdefault(_folder(p), []).append(p)
        return {
            folder: {k: v for k, v in _totals(group).items() if k in FOLDER_RATES}
            for folder, group in sorted(groups.items())
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "packs": [asdict(p) for p in self.packs],
            "totals": self.totals,
            "kind_confusion": kind_confusion(self.packs),
            "folders": self.folders,
        }


def _totals(packs: list[PackResult]) -> dict[str, Any]:
    decisions: dict[str, int] = {}
    for p in packs:
        decisions[p.decision or p.status] = decisions.get(p.decision or p.status, 0) + 1
    return {
        "packs": len(packs),
        "ac_at_1": _rate(packs, lambda p: _hit(p.hit_at_1)),
        "ac_at_3": _rate(packs, lambda p: _hit(p.hit_at_3)),
        "kind_accuracy": _rate(packs, lambda p: _hit(p.kind_ok)),
        "kind_accuracy_strict": _rate(packs, lambda p: _hit(p.kind_strict_ok)),
        "abstained_ok": _rate(packs, lambda p: _hit(p.abstained_ok)),
        "must_mention_rate": _rate(
            packs, lambda p: p.must_mention_hits / p.must_mention if p.must_mention else None
        ),
        "confirmed_mention_rate": _rate(
            packs,
            lambda p: p.confirmed_mention_hits / p.must_mention if p.must_mention else None,
        ),
        "leaks": sum(p.leaked for p in packs),
        "unsupported_in_answer": sum(p.unsupported_in_answer for p in packs),
        "decisions": decisions,
        "failed": sum(1 for p in packs if p.status != "completed"),
        "tool_calls": sum(p.tool_calls for p in packs),
        "llm_calls": sum(p.llm_calls for p in packs),
        "tokens": sum(p.tokens for p in packs),
        "seconds": round(sum(p.seconds for p in packs), 3),
        **_coherence_totals(packs),
    }


def _coherence_totals(packs: list[PackResult]) -> dict[str, Any]:
    answered = [p for p in packs if p.status == "completed"]
    findings = sum(len(p.coherence_findings) for p in answered)
    return {
        "coherence_findings": findings,
        "coherence_findings_per_answer": _ratio(findings, len(answered)),
        "answers_with_coherence_findings": sum(1 for p in answered if p.coherence_findings),
    }


def _coherence_score(
    result: PackResult, *, answer: str, composer_input: ComposerInput, services: list[str]
) -> None:
    found = answer_coherence_check(answer=answer, composer_input=composer_input, services=services)
    result.coherence_findings = [f"{f.code.value}: {f.excerpt}" for f in found]


def _ratio(numerator: float, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _mentions(text: str, services: list[str]) -> list[str]:
    lowered = _norm(text)
    found = []
    for service in services:
        match = re.search(rf"(?<![\w-]){re.escape(_norm(service))}(?![\w-])", lowered)
        if match:
            found.append((match.start(), service))
    return [service for _, service in sorted(found)]


_HEADING = re.compile(r"^(?:#{1,6}\s+.+|\*\*[^*\n]+\*\*[:：]?)\s*$")
# Sections that may name what is not established (docs/scenario-pack.md §10, `leaked`): hypotheses,
# missing information, next steps. Every other section — the text before the first heading,
# the conclusion, the confirmed part, and any heading not recognised — is what the answer
# states, whatever its hedging.
_UNSTATED_SECTION = re.compile(
    r"可能|假设|待证实|未经证实|缺少|缺失|下一步|建议|hypothes|possible|not confirmed|unconfirmed"
    r"|missing|next step|suggest|recommend",
    re.IGNORECASE,
)


def answer_stated_text(answer: str) -> str:
    """What an answer states as fact: all but its hypotheses, gaps and next-step sections."""
    stated: list[str] = []
    keep = True
    for line in answer.splitlines():
        if _HEADING.match(line.strip()):
            keep = not _UNSTATED_SECTION.search(line)
            if keep:
                stated.append(line)
            continue
        if keep:
            stated.append(line)
    return "\n".join(stated)


def root_cause_candidates(*, composer_input: ComposerInput, services: list[str]) -> list[str]:
    """Services ranked by the verified material: allowed root-cause claims, then hypotheses."""
    ranked: list[str] = []

    def add(entity: str | None, text: str) -> None:
        names = [entity] if entity else _mentions(text, services)
        for name in names:
            if name and name not in ranked:
                ranked.append(name)

    for claim in composer_input.allowed_claims:
        if claim.claim_type == "root_cause":
            add(claim.entity, claim.text)
    for hypothesis in composer_input.allowed_hypotheses:
        add(hypothesis.entity, hypothesis.text)
    return ranked


RESOURCE_KINDS = {"cpu", "memory", "disk"}  # each also counts as resource_exhaustion


def kind_matches(*, given: str | None, expected: str) -> bool:
    if not given:
        return False
    return given == expected or (expected == "resource_exhaustion" and given in RESOURCE_KINDS)


def first_root_cause_kind(*, composer_input: ComposerInput, first: str | None) -> str | None:
    """The kind the answer gives for its first root-cause candidate (claims, then hypotheses)."""
    return first_root_cause_kinds(composer_input=composer_input, first=first)[0]


def first_root_cause_kinds(
    *, composer_input: ComposerInput, first: str | None
) -> tuple[str | None, str | None]:
    """The kind the answer gives for its first root-cause candidate and the one other kind
    that same statement says its evidence cannot tell it from (None: none). Only the first
    statement with a kind counts: further hypotheses naming other kinds for that service
    never widen the pair, so an answer commits to at most two kinds."""
    items = [
        (c.entity, c.root_cause_kind, c.root_cause_kind_alternative)
        for c in composer_input.allowed_claims
        if c.claim_type == "root_cause"
    ]
    items += [
        (h.entity, h.root_cause_kind, h.root_cause_kind_alternative)
        for h in composer_input.allowed_hypotheses
    ]
    for entity, kind, alternative in items:
        if kind and (first is None or entity in (None, first)):
            return kind, (alternative if alternative and alternative != kind else None)
    return None, None


def confirmed_mentions(*, composer_input: ComposerInput, phrases: list[str]) -> int:
    """How many ``phrases`` occur in an allowed claim: what the answer states as confirmed."""
    confirmed = [_norm(c.text) for c in composer_input.allowed_claims]
    return sum(1 for p in phrases if any(_norm(p) in text for text in confirmed))


def _root_cause_score(
    result: PackResult, *, composer_input: ComposerInput, expected: dict[str, Any]
) -> None:
    expected_service = expected.get("root_cause_service")
    if expected_service:
        result.expected_root_cause = expected_service
    # an abstention pack's root is the service nobody observed: it is scored by
    # ``abstained_ok``, not as a ranking miss (naming what has no data first is no hit either)
    if expected_service and expected.get("abstain") is not True:
        result.hit_at_1 = expected_service in result.root_cause_candidates[:1]
        result.hit_at_3 = expected_service in result.root_cause_candidates[:3]
    expected_kind = expected.get("root_cause_kind")
    if expected_kind:
        first = result.root_cause_candidates[0] if result.root_cause_candidates else None
        result.expected_kind = str(expected_kind)
        result.root_cause_kind, result.root_cause_kind_alternative = first_root_cause_kinds(
            composer_input=composer_input, first=first
        )
        result.kind_ok = kind_scored(result)
        result.kind_strict_ok = kind_scored(result, strict=True)


def kind_scored(result: PackResult, *, strict: bool = False) -> bool:
    """Whether the answer gave the root its kind. The kind counts only when the expected root
    is the first candidate: the kind of a wrong first candidate is a kind for some other
    service, so a miss can never score kind. Where the pack names no root service, the first
    candidate's kind is the only one the answer commits to, and is scored.

    An answer that says its evidence cannot tell two kinds apart ("latency, or network,
    which no counter here can tell apart") commits to that pair: it is right when the
    expected kind is either of the two, as a network delay named latency where no network
    counter exists is (issue 26). The pair is at most two kinds (one alternative, from the
    statement that gives the kind), so no answer scores by naming every kind. ``strict``
    counts the first kind only; both rates are reported (``kind_accuracy_strict``)."""
    if result.expected_kind is None or (result.expected_root_cause and not result.hit_at_1):
        return False
    given = [result.root_cause_kind]
    if not strict:
        given.append(result.root_cause_kind_alternative)
    return any(kind_matches(given=kind, expected=result.expected_kind) for kind in given)


def abstention_ok(*, composer_input: ComposerInput, unobserved: str | None) -> bool:
    """The right answer where the data cannot show the root cause: no cause stated (not even
    as an inference), and the service nobody observed named as missing data or as a
    hypothesis (with no such service named in the pack, any missing data named at all)."""
    if composer_input.certainty() in {Certainty.CONFIRMED, Certainty.INFERRED}:
        return False
    if not unobserved:
        return bool(composer_input.missing_info)
    hypotheses = composer_input.allowed_hypotheses
    if any(h.entity == unobserved for h in hypotheses):
        return True
    texts = [*composer_input.missing_info, *(h.text for h in hypotheses)]
    return any(_mentions(text, [unobserved]) for text in texts)


def _abstention_score(
    result: PackResult, *, composer_input: ComposerInput, expected: dict[str, Any]
) -> None:
    if expected.get("abstain") is True:
        result.expected_abstain = True
        result.abstained_ok = abstention_ok(
            composer_input=composer_input, unobserved=expected.get("root_cause_service")
        )


def _wording_score(
    result: PackResult, *, answer: str, composer_input: ComposerInput, expected: dict[str, Any]
) -> None:
    """What the answer mentions, and what it states that it must not."""
    must_mention = [str(p) for p in expected.get("must_mention") or []]
    result.must_mention = len(must_mention)
    result.must_mention_hits = sum(1 for p in must_mention if _norm(p) in _norm(answer))
    result.confirmed_mention_hits = confirmed_mentions(
        composer_input=composer_input, phrases=must_mention
    )
    claims_text = [_norm(c.text) for c in composer_input.allowed_claims]
    stated = _norm(answer_stated_text(answer))
    for phrase in [str(p) for p in expected.get("must_not_claim") or []]:
        needle = _norm(phrase)
        if any(needle in text for text in claims_text) or needle in stated:
            result.leaked_phrases.append(phrase)
    result.leaked = len(result.leaked_phrases)


def _cost_score(result: PackResult, *, session: DiagnosisSession) -> None:
    result.tool_calls = session.invocations.count()
    usage = (session.llm_usage or {}).get("total", {})
    result.llm_calls = int(usage.get("calls", 0))
    result.tokens = int(usage.get("tokens_in", 0)) + int(usage.get("tokens_out", 0))
    result.seconds = round(session.duration_seconds or 0.0, 3)


def session_score(
    *, session: DiagnosisSession, expected: dict[str, Any], result: PackResult
) -> PackResult:
    composer_input = session_self_evaluation(session).composer_input or ComposerInput(
        decision=Decision(session.decision or Decision.LOW_CONFID),
        question=session.original_query,
    )
    services = list(session.environment.services or [])
    result.session_id = str(session.public_id)
    result.status = session.status
    result.decision = session.decision
    result.answer_source = session.answer_source
    result.root_cause_candidates = root_cause_candidates(
        composer_input=composer_input, services=services
    )
    _root_cause_score(result, composer_input=composer_input, expected=expected)
    _abstention_score(result, composer_input=composer_input, expected=expected)
    _wording_score(
        result, answer=session.final_answer, composer_input=composer_input, expected=expected
    )
    if expected.get("decision"):
        result.decision_ok = session.decision == expected["decision"]
    if expected.get("answer_source"):
        result.answer_source_ok = session.answer_source == expected["answer_source"]
    accepted = {c.claim_id for c in session_claims(session=session).claims if c.accepted}
    result.unsupported_in_answer = sum(
        1 for c in composer_input.allowed_claims if c.claim_id not in accepted
    )
    _cost_score(result, session=session)
    _coherence_score(
        result, answer=session.final_answer, composer_input=composer_input, services=services
    )
    return result


def pack_evaluate(*, path: Path, provider: str | None = None) -> PackResult:
    """Run one pack as a real session (same flow, same persistence) and score it."""
    result = PackResult(pack=path.name, path=str(path))
    try:
        # the sync validates every data file; the header alone names the pack first
        pack = pack_load(path, check_data=False)
        result.pack = pack.id
        environment = environment_sync_from_pack(path=path)
    except PackError as exc:
        result.status = LOAD_FAILED
        result.error = str(exc)
        return result
    session = diagnosis_submit(
        question=pack.question,
        environment=environment,
        requested_by="evaluate",
        source=DiagnosisSession.Source.API,
        language=pack.language or "zh-CN",
        provider=provider,
        enqueue=False,
    )
    finished = diagnosis_run(session_id=session.id) or DiagnosisSession.objects.get(pk=session.pk)
    if finished.error:
        result.error = finished.error
    return session_score(session=finished, expected=dict(pack.expected or {}), result=result)
