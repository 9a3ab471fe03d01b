"""Offline Executor: gather evidence like a careful SRE, rank suspects, write executor_evidence_v2.

Every excerpt is a string the tool summary promises to be in the output, and is
checked against the output before it is used; every number a claim states is
checked to occur in its excerpts, or left out.

The jobs live beside it: ``gather`` (which services and tools, in what order),
``knowledge`` (runbooks), ``claims`` (facts to claims with bindings), ``symptoms``
(which facts matter), ``hypotheses`` (hypotheses and actions) and ``gaps``
(missing info).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diagnosis.contracts import Claim, ExecutorEvidenceV2
from diagnosis.llm.base import ExecutorRequest, ToolRunner

from .analysis import LogSignal, Suspect
from .claims import (
    Draft,
    cascade_claim,
    cascade_edges,
    change_claim,
    change_root_claim,
    client_gap_claim,
    root_claim,
)
from .common import lang_key
from .gaps import missing_write
from .gather import Evidence, evidence_gather, suspects_localise
from .hypotheses import actions_write, hypotheses_write
from .knowledge import Chunk, chunks_gather, knowledge_query
from .localise import leaders_tied
from .symptoms import log_groups, metric_groups, symptoms_select
from .traces import trace_drafts
from .wording import labels_text

MAX_CLAIMS = 10


@dataclass
class _Cause:
    """The cause's own claims, what they quote and the groups of facts they already cover."""

    drafts: list[Draft] = field(default_factory=list)
    used_lines: set[str] = field(default_factory=set)
    seed: list[tuple[str, ...]] = field(default_factory=list)
    root: str | None = None


def execute_run(request: ExecutorRequest, tools: ToolRunner) -> tuple[ExecutorEvidenceV2, Evidence]:
    evidence = evidence_gather(request, tools)
    planned = [s for s in request.plan.get("services") or [] if isinstance(s, str)]
    suspects = suspects_localise(request, evidence, planned)
    ranked = [s for s in suspects if s.score > 0 or s.graph_score > 0]
    query = knowledge_query(ranked[0] if ranked else None, ranked, request.plan)
    chunks = chunks_gather(tools, evidence, query)  # a retry may have asked for runbooks too
    output = evidence_write(request, evidence, suspects, chunks)
    return output, evidence


def evidence_write(
    request: ExecutorRequest, evidence: Evidence, suspects: list[Suspect], chunks: list[Chunk]
) -> ExecutorEvidenceV2:
    lang = lang_key(request.language)
    ranked = [s for s in suspects if s.score > 0 or s.graph_score > 0]
    top = ranked[0] if ranked else None
    tied = leaders_tied(ranked)
    # leaders no evidence orders, or a leader whose fault may lie in a callee nobody observed
    # (localise.unobserved_callees): no cause is stated, the gap says what would settle it
    undetermined = bool(tied) or (top is not None and bool(top.unobserved_callees))
    edges = cascade_edges(suspects, top.service) if top is not None and not undetermined else []
    cause = _cause_write(None if undetermined else top, edges, suspects, lang)
    tiers = _tiers(ranked, top, edges)
    spans = trace_drafts(top, evidence.calls, lang)  # what the spans say of it, if any
    cause.used_lines.update(b.evidence_excerpt for d in spans for b in d.bindings)
    drafts = cause.drafts + spans + symptoms_select(tiers, lang, cause.used_lines, cause.seed)
    notable = [e for e, _ in tiers]
    weak = [e.service for e in ranked if e not in notable]
    claims = _claims_number(drafts, _flagged(request.retry_context))
    root = _root_stated(claims, cause.root)
    return ExecutorEvidenceV2(
        claims=claims,
        hypotheses=hypotheses_write(notable, root, top, chunks, lang),
        recommended_actions=actions_write(top, notable, root, chunks, lang),
        missing_info=missing_write(evidence, suspects, root, weak, bool(chunks), lang, tied=tied),
    )


def _root_stated(claims: list[Claim], root: str | None) -> str | None:
    """The root cause, if a claim still states it: a retry leaves out the claims the previous
    attempt's checks flagged (``_flagged``), and a root whose claim was left out is the
    leading hypothesis again, as its flagged claim was on that attempt.

    A retry asks for more evidence; it must not lose what the first attempt found. The same
    evidence ranks the same services: leaving the root out of both the claims and the
    hypotheses would rank on less of it, and a caller would lead in its place."""
    stated = any(c.claim_type == "root_cause" and c.entity == root for c in claims)
    return root if stated else None


def _cause_write(
    top: Suspect | None,
    edges: list[tuple[Suspect, str, LogSignal]],
    suspects: list[Suspect],
    lang: str,
) -> _Cause:
    """The root cause (a change before new errors, else resource and own logs, else the way
    to a flat callee its client wait rose on), else the change seen there; then how the
    failure spread along the calls."""
    cause = _Cause()
    cascade = cascade_claim(edges, lang) if edges else None
    if top is not None and top.kind == "change":
        change_root = change_root_claim(top, lang)
        if change_root is not None:
            cause.drafts.append(change_root)
            cause.root = top.service
            cause.used_lines.update(b.evidence_excerpt for b in change_root.bindings)
    if top is not None and cause.root is None:
        root = root_claim(top, lang, victims=cascade is None)
        if root is not None:
            draft, metric, lg = root
            cause.drafts.append(draft)
            cause.root = top.service
            key = f"{metric.service}|{metric.metric}|{labels_text(metric)}"
            cause.used_lines.update({metric.line, lg.line, key})
            cause.seed += [*metric_groups(metric), *log_groups(lg)]
    if top is not None and cause.root is None:
        gap = client_gap_claim(top, suspects, lang)
        if gap is not None:
            cause.drafts.append(gap)
            cause.root = top.service
            cause.used_lines.update(b.evidence_excerpt for b in gap.bindings)
    if top is not None and cause.root is None:
        change_draft = change_claim(top, lang)
        if change_draft is not None:
            cause.drafts.append(change_draft)
    if cascade is not None:
        cause.drafts.append(cascade)
        cause.used_lines.update(b.evidence_excerpt for b in cascade.bindings)
        cause.used_lines.update(lg.line for _, _, lg in edges if lg.line)
    return cause


def _tiers(
    ranked: list[Suspect], top: Suspect | None, edges: list[tuple[Suspect, str, LogSignal]]
) -> list[tuple[Suspect, int]]:
    """The services worth describing: the suspect, the call chain, then other real anomalies."""
    focus = top.service if top is not None else None
    on_path = {caller.service for caller, _, _ in edges}
    tiers: list[tuple[Suspect, int]] = []
    for entry in ranked:
        if entry is top:
            tiers.append((entry, 0))
        elif entry.service in on_path or (focus and focus in entry.downstream_of):
            tiers.append((entry, 1))
        elif entry.notable:
            tiers.append((entry, 2))
    tiers.sort(key=lambda item: item[1])
    return tiers


def _claims_number(drafts: list[Draft], flagged: set[str]) -> list[Claim]:
    """The first MAX_CLAIMS drafts as claims, numbered; a flagged number is left out."""
    claims: list[Claim] = []
    for number, draft in enumerate(drafts[:MAX_CLAIMS], start=1):
        claim_id = f"claim-{number}"
        if claim_id in flagged:
            continue
        claims.append(
            Claim(
                claim_id=claim_id,
                claim_type=draft.claim_type,
                claim_text=draft.text,
                entity=draft.entity,
                support_level=draft.support,
                evidence_bindings=draft.bindings,
                root_cause_kind=(draft.kind or None) if draft.claim_type == "root_cause" else None,
                root_cause_kind_alternative=(
                    draft.alternative if draft.claim_type == "root_cause" and draft.kind else None
                ),
            )
        )
    return claims


def _flagged(retry_context: dict[str, Any] | None) -> set[str]:
    """Claim ids the Gatekeeper demoted or the Verifier flagged on the previous attempt.

    The engine is deterministic, so the same draft gets the same claim id again.
    """
    ids: set[str] = set()
    if not retry_context:
        return ids
    # The router's retry_context: Gatekeeper-demoted claims and Verifier-flagged ones.
    for key in ("demoted_claims", "flagged_claims"):
        items = retry_context.get(key) or []
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, dict) and item.get("claim_id"):
                ids.add(str(item["claim_id"]))
    return ids
