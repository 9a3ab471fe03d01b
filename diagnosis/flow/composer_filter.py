"""Composer input filter (docs/contracts.md §4): what the Composer may say, decided by code.

- Gatekeeper accepted:
  ``direct_observation`` → allowed_claims (definite);
  ``reasonable_inference`` → allowed_claims (bounded wording);
  ``overstated`` → allowed_hypotheses, with its basis (the verified excerpts);
  anything else → missing_info ("not confirmed: …").
- Gatekeeper demoted because its evidence was invented or wrong
  (``EVIDENCE_FAILURE_CODES``), whatever the Verifier said → missing_info: a gap
  worded by the evidence it lacks, repeating none of its numbers, names or times.
- A claim any of whose bindings is an instruction (``excerpt_is_instruction``)
  → missing_info, whatever else held: instructions are invented evidence.
- Gatekeeper demoted otherwise (its bindings hold: runbook only, not specific):
  ``overstated`` → allowed_hypotheses; anything else → missing_info.

A claim the Gatekeeper demoted is never an allowed claim, whatever the Verifier
said, and only a claim with valid bindings may become a hypothesis. Under
REJECT the allowed hypotheses are always empty. The Executor's own hypotheses
pass with ``claim_id`` unset: only those, with a basis, may lead the conclusion.

One figure per series (``_one_figure_per_series``): among the allowed claims, two
that give one series (as the coherence check identifies it) two ratios to its
baseline are never both stated; the one stated is the cause claim's, else the one
bound to the latest invocation; the other is placed ``superseded_figure`` — out of
the answer, shown to reviewers with the claim whose figure was kept, and kept in
the audit record as the Executor wrote it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from django.utils.translation import gettext as _

from diagnosis.contracts import (
    ALLOWED_CLASSIFICATIONS,
    CAUSE_CLAIM_TYPES,
    EVIDENCE_FAILURE_CODES,
    AllowedClaim,
    AllowedHypothesis,
    Claim,
    ClaimCheck,
    ClaimType,
    Classification,
    ComposerAction,
    ComposerInput,
    Decision,
    ExecutorEvidenceV2,
    FindingCode,
    GatekeeperClaimResult,
    GatekeeperReport,
    Verdict,
    VerifierOutput,
    Wording,
)
from diagnosis.evidence.vocab import KIND_NAMED
from diagnosis.flow.coherence import (
    kinds_unshown,
    series_figures_conflict,
    series_ratios,
    stated_kinds,
)
from diagnosis.i18n import language_override

P = ParamSpec("P")
R = TypeVar("R")
_BASIS_EXCERPT_CHARS = 160
_TRACE_NUMBER = re.compile(r"(\d+)$")


@dataclass
class FilterResult:
    composer_input: ComposerInput
    # claim_id -> what happened to it, for the audit trail and the evidence view
    placements: dict[str, str] = field(default_factory=dict)
    disagreements: list[dict[str, str]] = field(default_factory=list)
    # claim_id -> the claim_id whose figure for the same series was stated instead
    superseded: dict[str, str] = field(default_factory=dict)


def _about(claim_type: str) -> str:
    """What kind of statement a claim was, in words that name nothing it said."""
    if claim_type in (ClaimType.ROOT_CAUSE, ClaimType.CONTRIBUTING_FACTOR):
        return _("一条关于原因的说法")
    if claim_type == ClaimType.IMPACT:
        return _("一条关于影响范围的说法")
    if claim_type == ClaimType.TIMELINE:
        return _("一条关于时间线的说法")
    return _("一条关于现象的说法")


def evidence_gap(*, claim_type: str, codes: set[str]) -> str:
    """The missing-info line for a claim whose evidence was invented or wrong.

    Worded by what evidence is missing; it repeats none of the claim's numbers,
    names or times, which nothing verified.
    """
    about = _about(claim_type)
    if FindingCode.EXCERPT_IS_INSTRUCTION in codes:
        return _(
            "{about}未被采用：它引用的文本是写给模型的指令，而不是观测数据；"
            "需要真实的日志或指标证据。"
        ).format(about=about)
    if codes & {FindingCode.CLAIM_FACT_UNBOUND, FindingCode.NUMBER_MISMATCH}:
        return _(
            "{about}未被采用：它陈述的数值、时间或名称不在所引用的工具输出中；"
            "需要包含这些数值的日志或指标。"
        ).format(about=about)
    if FindingCode.INVOCATION_FAILED in codes:
        return _(
            "{about}未被采用：它引用的工具调用没有成功返回数据；需要重新查询相关的日志或指标。"
        ).format(about=about)
    return _(
        "{about}未被采用：它引用的证据在本次工具输出中找不到；需要能直接显示该现象的日志或指标。"
    ).format(about=about)


def _basis(claim: Claim, result: GatekeeperClaimResult | None) -> str:
    """The Gatekeeper-verified excerpts a claim rests on (its basis as a hypothesis)."""
    valid = set(range(len(claim.evidence_bindings)))
    if result is not None:
        valid -= {f.binding for f in result.findings if f.binding is not None}
    excerpts = []
    for index, binding in enumerate(claim.evidence_bindings):
        text = " ".join((binding.evidence_excerpt or "").split())
        if index in valid and text:
            if len(text) > _BASIS_EXCERPT_CHARS:
                text = text[: _BASIS_EXCERPT_CHARS - 1] + "…"
            excerpts.append(text)
    return _("；").join(dict.fromkeys(excerpts))


def _in_answer_language(build: Callable[P, R]) -> Callable[P, R]:
    """Run ``build`` with its ``language`` argument active for gettext."""

    @functools.wraps(build)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        language = str(kwargs.get("language") or "")
        with language_override(language):
            return build(*args, **kwargs)

    return wrapper


@dataclass
class _Placed:
    """Where the filter put each claim so far (one pass over the Executor's claims)."""

    claims: list[AllowedClaim] = field(default_factory=list)
    hypotheses: list[AllowedHypothesis] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    placements: dict[str, str] = field(default_factory=dict)
    disagreements: list[dict[str, str]] = field(default_factory=list)
    superseded: dict[str, str] = field(default_factory=dict)


def _verdicts(verifier: VerifierOutput | None) -> dict[str, ClaimCheck]:
    """The Verifier's first check of each claim id."""
    checks: dict[str, ClaimCheck] = {}
    if verifier is not None:
        for claim_check in verifier.claim_checks:
            checks.setdefault(claim_check.claim_id, claim_check)
    return checks


def _claim_place(
    placed: _Placed,
    claim: Claim,
    check: ClaimCheck | None,
    result: GatekeeperClaimResult | None,
    decision: Decision,
) -> None:
    """Place one (first-seen, non-empty) claim: allowed, a gap, a hypothesis or missing."""
    classification = check.classification if check else Classification.UNSUPPORTED
    accepted = result is not None and result.verdict == Verdict.ACCEPTED
    codes = {f.code for f in result.findings} if result is not None else set()
    text = claim.claim_text.strip()
    if classification in ALLOWED_CLASSIFICATIONS and not accepted:
        placed.disagreements.append(
            {"claim_id": claim.claim_id, "verifier": classification.value, "gatekeeper": "demoted"}
        )
    evidence_failed = not accepted and (result is None or bool(codes & EVIDENCE_FAILURE_CODES))
    if FindingCode.EXCERPT_IS_INSTRUCTION in codes:
        # an instruction quoted as evidence is invented evidence: never a claim, a hypothesis
        # or the conclusion, only a gap (also for reports stored before the Gatekeeper said so)
        accepted, evidence_failed = False, True
    if accepted and classification in ALLOWED_CLASSIFICATIONS:
        direct = classification == Classification.DIRECT_OBSERVATION
        placed.claims.append(
            AllowedClaim(
                claim_id=claim.claim_id,
                text=text,
                wording=Wording.DEFINITE if direct else Wording.BOUNDED,
                entity=claim.entity,
                claim_type=claim.claim_type,
                root_cause_kind=claim.root_cause_kind,
                root_cause_kind_alternative=claim.root_cause_kind_alternative,
            )
        )
        placed.placements[claim.claim_id] = "allowed_claim"
    elif evidence_failed:
        placed.gaps.append(evidence_gap(claim_type=claim.claim_type, codes=codes))
        placed.placements[claim.claim_id] = "evidence_gap"
    elif classification == Classification.OVERSTATED and decision != Decision.REJECT:
        # a kind none of its excerpts shows is no hypothesis either: the claim stays, unkinded
        kind_unbound = FindingCode.KIND_UNBOUND in codes
        placed.hypotheses.append(
            AllowedHypothesis(
                text=KIND_NAMED.sub("", text).strip() if kind_unbound else text,
                basis=_basis(claim, result),
                entity=claim.entity,
                claim_id=claim.claim_id,
                root_cause_kind=None if kind_unbound else claim.root_cause_kind,
                root_cause_kind_alternative=(
                    None if kind_unbound else claim.root_cause_kind_alternative
                ),
            )
        )
        placed.placements[claim.claim_id] = "hypothesis"
    else:
        placed.missing.append(_("未能证实：{}").format(text))
        placed.placements[claim.claim_id] = "missing_info"


def _claims_place(
    output: ExecutorEvidenceV2,
    gatekeeper: GatekeeperReport,
    verifier: VerifierOutput | None,
    decision: Decision,
) -> _Placed:
    checks = _verdicts(verifier)
    placed = _Placed()
    seen: set[str] = set()
    for claim in output.claims:
        if claim.claim_id in seen:  # a duplicate id never reaches the user twice
            placed.placements.setdefault(claim.claim_id, "dropped")
            continue
        seen.add(claim.claim_id)
        if not claim.claim_text.strip():
            placed.placements[claim.claim_id] = "dropped"
            continue
        result = gatekeeper.result_for(claim.claim_id)
        _claim_place(placed, claim, checks.get(claim.claim_id), result, decision)
    return placed


def _latest_invocation(claim: Claim) -> int:
    """The latest tool invocation a claim is bound to (its trace number; -1: none)."""
    numbers = [-1]
    for binding in claim.evidence_bindings:
        numbers += binding.source_invocation_ids
        found = _TRACE_NUMBER.search(binding.source_id or "")
        if found:
            numbers.append(int(found.group(1)))
    return max(numbers)


def _figure_kept(
    ratios: list[tuple[frozenset[str], float]], stated: list[tuple[frozenset[str], float, str]]
) -> str | None:
    """The claim whose stated figure one of ``ratios`` would contradict (None: no such)."""
    return next(
        (
            claim_id
            for key, value, claim_id in stated
            if series_figures_conflict(ratios, [(key, value)])
        ),
        None,
    )


def _one_figure_per_series(
    placed: _Placed, output: ExecutorEvidenceV2, services: Iterable[str]
) -> None:
    """Among the allowed claims, one ratio to its baseline per series is stated.

    Two windows of one series give two true ratios (each bound to its own invocation's
    output), but an answer stating both says two different things about one series, and a
    reader cannot tell which holds. Which one is stated is an order of precedence over the
    claims, not over the values (the larger or smaller ratio is no truer): a cause claim's
    figure first, because the conclusion and its basis are built on it; then the claim
    bound to the latest invocation, because a second query over a series is the Executor's
    later reading of it (a window it chose after the first); then the later claim. A claim
    whose ratio conflicts with one already stated leaves the answer entirely (its other
    facts are worded around that figure), placed ``superseded_figure``: reviewers see it and
    the claim whose figure was kept, and the audit record keeps it as written. An overstated
    claim listed as a hypothesis yields to every allowed claim the same way (what its
    evidence showed is less than it said; a confirmed figure is not second-guessed by it).
    """
    services = list(services)
    claims = {c.claim_id: c for c in output.claims}
    order = sorted(
        enumerate(placed.claims),
        key=lambda item: (
            item[1].claim_type not in CAUSE_CLAIM_TYPES,
            -_latest_invocation(claims[item[1].claim_id]) if item[1].claim_id in claims else 1,
            -item[0],
        ),
    )
    stated: list[tuple[frozenset[str], float, str]] = []
    dropped: set[str] = set()
    for _index, claim in order:
        ratios = series_ratios(claim.text, services)
        kept = _figure_kept(ratios, stated)
        if kept is not None:
            dropped.add(claim.claim_id)
            placed.placements[claim.claim_id] = "superseded_figure"
            placed.superseded[claim.claim_id] = kept
            continue
        stated += [(key, value, claim.claim_id) for key, value in ratios]
    placed.claims = [c for c in placed.claims if c.claim_id not in dropped]
    # the Executor's own hypotheses are left whole: their basis is what a conclusion may lead
    # with, and the coherence check re-renders an answer they make incoherent
    kept_hypotheses = []
    for hypothesis in placed.hypotheses:
        ratios = series_ratios(hypothesis.text, services)
        kept = _figure_kept(ratios, stated)
        if hypothesis.claim_id is not None and kept is not None:
            placed.placements[hypothesis.claim_id] = "superseded_figure"
            placed.superseded[hypothesis.claim_id] = kept
            continue
        kept_hypotheses.append(hypothesis)
    placed.hypotheses = kept_hypotheses


def _hypothesis_findings(gatekeeper: GatekeeperReport, code: FindingCode) -> dict[int, set[str]]:
    """The positions of the Executor's hypotheses the Gatekeeper reported with ``code``, each
    with the parts it named (``detail_params.part``: text or basis)."""
    found: dict[int, set[str]] = {}
    for item in gatekeeper.findings:
        if item.code == code.value:
            position = item.detail_params.get("hypothesis")
            if isinstance(position, int) and not isinstance(position, bool):
                found.setdefault(position, set()).add(str(item.detail_params.get("part", "")))
    return found


def _own_hypotheses(
    output: ExecutorEvidenceV2, decision: Decision, gatekeeper: GatekeeperReport
) -> list[AllowedHypothesis]:
    """The Executor's own hypotheses (none under REJECT), as far as the session's outputs
    bear them out: one whose text invents a fact is left out, one whose basis does keeps no
    basis (``hypothesis_fact_unbound``), and one whose kind no tool output about its service
    shows keeps its text without the kind and its "（类型：…）" (``hypothesis_kind_unshown``)."""
    if decision == Decision.REJECT:
        return []
    unshown = _hypothesis_findings(gatekeeper, FindingCode.HYPOTHESIS_KIND_UNSHOWN)
    invented = _hypothesis_findings(gatekeeper, FindingCode.HYPOTHESIS_FACT_UNBOUND)
    kept = []
    for position, hypothesis in enumerate(output.hypotheses):
        text = hypothesis.hypothesis_text.strip()
        if not text or "text" in invented.get(position, ()):
            continue
        kinded = position not in unshown
        kept.append(
            AllowedHypothesis(
                text=text if kinded else KIND_NAMED.sub("", text).strip(),
                basis="" if "basis" in invented.get(position, ()) else hypothesis.basis.strip(),
                entity=hypothesis.entity,
                root_cause_kind=hypothesis.root_cause_kind if kinded else None,
                root_cause_kind_alternative=(
                    hypothesis.root_cause_kind_alternative if kinded else None
                ),
            )
        )
    return kept


@_in_answer_language
def composer_input_build(
    *,
    question: str,
    language: str,
    decision: Decision,
    executor_output: ExecutorEvidenceV2 | None,
    gatekeeper: GatekeeperReport,
    verifier: VerifierOutput | None,
    services: Iterable[str] = (),
) -> FilterResult:
    """The Composer's input, from the Gatekeeper's and the Verifier's results only.

    ``services`` are the environment's service names (they tell one series from another).
    """
    output = executor_output or ExecutorEvidenceV2()
    placed = _claims_place(output, gatekeeper, verifier, decision)
    _one_figure_per_series(placed, output, services)
    missing = [*placed.missing, *(i.strip() for i in output.missing_info if i and i.strip())]
    actions = [
        ComposerAction(text=a.action_text.strip(), reason=a.reason.strip())
        for a in output.recommended_actions
        if a.action_text.strip()
    ]
    composer_input = ComposerInput(
        decision=decision,
        language=language,
        question=question,
        allowed_claims=placed.claims,
        # the Executor's own hypotheses first: they are what a conclusion may lead with
        allowed_hypotheses=_kinds_evidenced(
            placed.claims, _own_hypotheses(output, decision, gatekeeper) + placed.hypotheses
        ),
        missing_info=_dedupe(placed.gaps + missing),
        recommended_actions=actions,
    )
    return FilterResult(
        composer_input=composer_input,
        placements=placed.placements,
        disagreements=placed.disagreements,
        superseded=placed.superseded,
    )


def _kinds_evidenced(
    claims: list[AllowedClaim], hypotheses: list[AllowedHypothesis]
) -> list[AllowedHypothesis]:
    """The hypotheses with only the kinds their basis shows (``coherence.kinds_unshown``).

    A hypothesis carries no binding, so its basis is all that can show its kind; a kind it
    does not show is the conclusion without its reason (a memory fault on a basis of CPU
    use), and the answer would state it. The kind goes, the hypothesis stays; a second kind
    goes alone when only it is unshown.
    """
    stated = stated_kinds(claims, hypotheses)
    unshown = kinds_unshown(stated)[len(stated) - len(hypotheses) :]
    kept = []
    for hypothesis, missing in zip(hypotheses, unshown, strict=True):
        if hypothesis.root_cause_kind in missing:
            hypothesis = hypothesis.model_copy(
                update={"root_cause_kind": None, "root_cause_kind_alternative": None}
            )
        elif hypothesis.root_cause_kind_alternative in missing:
            hypothesis = hypothesis.model_copy(update={"root_cause_kind_alternative": None})
        kept.append(hypothesis)
    return kept


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
