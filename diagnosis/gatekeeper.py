"""The Gatekeeper: code that checks every evidence binding (contracts.md §2).

Given the parsed Executor output and this session's persisted tool
invocations, every claim's bindings are checked; a claim whose evidence does
not hold is ``demoted`` with a finding code for each failure, and the
``gatekeeper_v1`` report is stored at ``session.self_evaluation["gatekeeper"]``.

Decisions where contracts.md is silent:

- ``support_level`` ``indirect`` and ``none`` claims are checked like any other
  and accepted when they have at least one valid binding *of any kind*
  (a runbook chunk is fine: they are not confirmed facts, and the Verifier
  still classifies them). ``direct`` (and anything unknown, read as direct)
  needs a valid binding to a ``query_metrics`` or ``query_logs`` invocation.
- A knowledge chunk counts as returned by a ``lookup_knowledge`` invocation
  when its id is listed in the invocation's ``summary["chunks"]`` (or, for a
  summary without that list, when its header is in the output); the excerpt
  must occur inside that chunk's block of the output (the block from its
  ``=== <chunk_id> | … ===`` header to the next returned chunk's header).
- A ``tool_trace`` binding may cite a ``lookup_knowledge`` invocation by trace
  ref; it is then a knowledge binding (it cannot confirm a direct claim).
- Normalisation goes one step beyond "whitespace between CJK characters": a
  space next to a CJK character on either side is removed, so "服务 payment
  超时" matches "服务payment超时" (Chinese writers space Latin words
  inconsistently). All quote characters (straight, curly, backtick, CJK corner
  brackets) become ``"``; all dashes (hyphen, en/em dash, minus) become ``-``.
- Numbers are whole: a run of digits includes ``.``/``,`` between digits, so
  ``25%`` matches neither inside ``325%`` nor inside ``0.25%``.
- The minimum length (8) counts the characters of the excerpt's fragments,
  not the ``...`` joining them. It is 8 characters in every script, so a
  Chinese excerpt needs 8 characters too.
- A binding whose ``source_invocation_ids`` disagree is invalid even when its
  ``source_id`` and excerpt hold.
- Findings of a claim are reported in this order: parse findings, then
  ``duplicate_claim_id``, then per-binding findings (``binding`` is the index
  the model wrote), then ``no_bindings``/``knowledge_only_binding``.
- ``report.claims`` is aligned by position with ``parsed.output.claims``;
  with duplicate ids, use ``gatekeeper_accepted_claims`` rather than a lookup
  by id.
- ``gatekeeper_check`` never raises; ``gatekeeper_run`` lets database errors
  (not input errors) propagate to the flow.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from diagnosis.contracts import (
    Claim,
    ClaimType,
    EvidenceBinding,
    Finding,
    FindingCode,
    GatekeeperClaimResult,
    GatekeeperCounts,
    GatekeeperReport,
    ParseStatus,
    SourceType,
    SupportLevel,
    Verdict,
)
from diagnosis.parsing import ClaimNotes, ParsedExecutorOutput, detail_clip, finding

if TYPE_CHECKING:
    from diagnosis.models import DiagnosisSession

MIN_EXCERPT_CHARS = 8
EVIDENCE_TOOLS = frozenset({"query_metrics", "query_logs"})
KNOWLEDGE_TOOL = "lookup_knowledge"
STATUS_OK = "ok"

_KIND_EVIDENCE = "evidence"
_KIND_KNOWLEDGE = "knowledge"
_KIND_OTHER = "other"
_MAX_CANDIDATES_PER_FRAGMENT = 200_000
_MAX_LOOKUP_IDS = 10_000
_MAX_DB_ID = 2**63 - 1

# --- normalisation ---------------------------------------------------------------

_QUOTES = "'`\u2018\u2019\u201a\u201b\u2032\u2035\u201c\u201d\u201e\u201f\u2036\u00ab\u00bb"
_QUOTES += "\u2039\u203a\u300c\u300d\u300e\u300f\u301d\u301e\u301f"
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d"
_PUNCT = {ch: '"' for ch in _QUOTES} | {ch: "-" for ch in _DASHES}
_NON_ASCII_PUNCT = tuple(ch for ch in _PUNCT if not ch.isascii())

_CJK = (
    "\u3001-\u303f"  # CJK symbols and punctuation (U+3000 is a space after NFKC)
    "\u3040-\u30ff"  # kana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\U00020000-\U0003134f"  # ideograph extensions
)
_CJK_CHAR = re.compile(f"[{_CJK}]")
# a space preceded or followed by a CJK character (starts with a literal: fast scan)
_SPACE_NEXT_TO_CJK = re.compile(f" (?:(?<=[{_CJK}] )|(?=[{_CJK}]))")
_ELLIPSIS = re.compile(r"\.{3,}")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# any whole number; atomic and anchored at a run's start so long digit runs cannot backtrack
_ANY_NUMBER = r"(?<!\d)(?>\d+(?:[.,]\d+)*)"
_NON_DIGIT = re.compile(r"\D")


def normalize_text(text: str) -> str:
    """NFKC, casefold, quotes/dashes unified, whitespace collapsed, no spaces next to CJK."""
    if not text:
        return ""
    if text.isascii():
        folded = text.lower()
        if "'" in folded or "`" in folded:
            folded = folded.replace("'", '"').replace("`", '"')
        return " ".join(folded.split())
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    folded = text.casefold()
    for ch in _NON_ASCII_PUNCT:
        if ch in folded:
            folded = folded.replace(ch, _PUNCT[ch])
    if "'" in folded or "`" in folded:
        folded = folded.replace("'", '"').replace("`", '"')
    folded = " ".join(folded.split())
    if folded.isascii():
        return folded
    return _SPACE_NEXT_TO_CJK.sub("", folded)


def _normalize_mapped(text: str) -> tuple[str, list[int], list[int]]:
    """``normalize_text`` with, for each output character, its span in ``text``.

    Slow (a Python loop per character); used only to highlight one output.
    NFKC is applied per base character and its combining marks, which equals
    whole-text NFKC except for rare compositions across starters.
    """
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    n = len(text)
    i = 0
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        for ch in unicodedata.normalize("NFKC", text[i:j]).casefold():
            chars.append(_PUNCT.get(ch, ch))
            starts.append(i)
            ends.append(j)
        i = j
    # collapse whitespace runs to one space, strip both ends
    c2: list[str] = []
    s2: list[int] = []
    e2: list[int] = []
    pending: tuple[int, int] | None = None
    for ch, s, e in zip(chars, starts, ends, strict=True):
        if ch.isspace():
            if pending is None:
                pending = (s, e)
            continue
        if pending is not None and c2:
            c2.append(" ")
            s2.append(pending[0])
            e2.append(pending[1])
        pending = None
        c2.append(ch)
        s2.append(s)
        e2.append(e)
    # drop spaces next to a CJK character
    c3: list[str] = []
    s3: list[int] = []
    e3: list[int] = []
    for k, ch in enumerate(c2):
        if ch == " " and (
            (k > 0 and _CJK_CHAR.match(c2[k - 1]))
            or (k + 1 < len(c2) and _CJK_CHAR.match(c2[k + 1]))
        ):
            continue
        c3.append(ch)
        s3.append(s2[k])
        e3.append(e2[k])
    return "".join(c3), s3, e3


# --- excerpt matching ----------------------------------------------------------


@dataclass(frozen=True)
class MatchResult:
    """Whether an excerpt occurs in a normalised output, and where.

    ``code`` is ``None`` when it matched, else ``excerpt_too_short``,
    ``excerpt_not_found`` or ``number_mismatch``. ``spans`` are the fragments'
    positions in the *normalised* text.
    """

    matched: bool
    code: str | None = None
    detail: str = ""
    spans: tuple[tuple[int, int], ...] = ()

    def __bool__(self) -> bool:
        return self.matched


def _fragments(normalized_excerpt: str) -> list[str]:
    return [f.strip() for f in _ELLIPSIS.split(normalized_excerpt) if f.strip()]


def _digit_before(text: str, pos: int) -> bool:
    if pos <= 0:
        return False
    prev = text[pos - 1]
    return prev.isdigit() or (prev in ".," and pos > 1 and text[pos - 2].isdigit())


def _digit_after(text: str, end: int) -> bool:
    if end >= len(text):
        return False
    nxt = text[end]
    return nxt.isdigit() or (nxt in ".," and end + 1 < len(text) and text[end + 1].isdigit())


def _find_whole(text: str, fragment: str, start: int) -> int:
    """``text.find(fragment, start)`` where the match neither begins nor ends inside a number."""
    lead = fragment[0].isdigit()
    trail = fragment[-1].isdigit()
    pos = text.find(fragment, start)
    if not (lead or trail):
        return pos
    tries = 0
    while pos != -1 and tries < _MAX_CANDIDATES_PER_FRAGMENT:
        tries += 1
        if lead and _digit_before(text, pos):
            # no match can start inside this run of digits: jump past it
            nxt = _NON_DIGIT.search(text, pos)
            if nxt is None:
                return -1
            pos = text.find(fragment, nxt.start())
            continue
        if trail and _digit_after(text, pos + len(fragment)):
            pos = text.find(fragment, pos + 1)
            continue
        return pos
    return -1


def _find_in_order(text: str, fragments: list[str]) -> list[tuple[int, int]]:
    """Spans of the fragments found one after another (stops at the first one missing)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for fragment in fragments:
        pos = _find_whole(text, fragment, cursor)
        if pos == -1:
            return spans
        spans.append((pos, pos + len(fragment)))
        cursor = pos + len(fragment)
    return spans


def _numbers_ignored(fragment: str) -> re.Pattern[str]:
    """The fragment as a pattern in which every number matches any number."""
    parts = _NUMBER.split(fragment)
    return re.compile(_ANY_NUMBER.join(re.escape(part) for part in parts))


def _found_ignoring_numbers(text: str, fragments: list[str]) -> bool:
    cursor = 0
    for fragment in fragments:
        match = _numbers_ignored(fragment).search(text, cursor)
        if match is None:
            return False
        cursor = match.end()
    return True


def _match(excerpt: str, text: str) -> MatchResult:
    fragments = _fragments(normalize_text(excerpt or ""))
    length = sum(len(f) for f in fragments)
    if length < MIN_EXCERPT_CHARS:
        return MatchResult(
            False,
            FindingCode.EXCERPT_TOO_SHORT.value,
            f"excerpt has {length} characters after normalisation; at least "
            f"{MIN_EXCERPT_CHARS} are needed",
        )
    spans = _find_in_order(text, fragments)
    if len(spans) == len(fragments):
        return MatchResult(True, None, "", tuple(spans))
    missing = fragments[len(spans)]
    if any(ch.isdigit() for f in fragments for ch in f) and _found_ignoring_numbers(
        text, fragments
    ):
        return MatchResult(
            False,
            FindingCode.NUMBER_MISMATCH.value,
            detail_clip(f"the text around {missing!r} is there, but with different numbers"),
        )
    where = f"fragment {len(spans) + 1} of {len(fragments)}" if len(fragments) > 1 else "excerpt"
    return MatchResult(
        False,
        FindingCode.EXCERPT_NOT_FOUND.value,
        detail_clip(f"{where} not found in the output: {missing!r}"),
    )


def excerpt_matches(excerpt: str, normalized_output: str) -> MatchResult:
    """Check an excerpt (raw, as the model wrote it) against an already normalised output."""
    try:
        return _match(excerpt, normalized_output or "")
    except Exception as exc:
        return MatchResult(False, FindingCode.INTERNAL_ERROR.value, type(exc).__name__)


def excerpt_locate(excerpt: str, text: str) -> list[tuple[int, int]]:
    """Character spans in the original ``text`` where the excerpt's fragments matched.

    For highlighting evidence in context; ``[]`` when the excerpt does not
    match (too short, not found, or numbers differ). About 1 s per MB of text
    when it matches (tool outputs are bounded to 16k characters by default).
    """
    try:
        if not _match(excerpt, normalize_text(text or "")).matched:
            return []  # the fast check first: the mapped pass is a Python loop per character
        normalized, starts, ends = _normalize_mapped(text or "")
        result = _match(excerpt, normalized)
        if not result.matched:
            return []
        return [(starts[s], ends[e - 1]) for s, e in result.spans]
    except Exception:
        return []


# --- invocations and knowledge blocks ------------------------------------------------


@dataclass(frozen=True)
class InvocationRecord:
    """What the Gatekeeper needs of a ``tool_invocation`` row."""

    id: int
    session_id: int
    trace_ref: str
    tool_name: str
    status: str
    output: str
    summary: dict


_BLOCK_HEADER = re.compile(r"^===[ \t]*([^|\n]+?)[ \t]*(?:\|[^\n]*)?===[ \t]*\r?$", re.MULTILINE)


def _returned_chunk_ids(summary: object) -> set[str] | None:
    if not isinstance(summary, dict) or not isinstance(summary.get("chunks"), list):
        return None
    ids = set()
    for chunk in summary["chunks"]:
        if isinstance(chunk, dict) and isinstance(chunk.get("chunk_id"), str):
            ids.add(chunk["chunk_id"].strip())
    return ids


def knowledge_blocks(output: str, summary: object) -> list[tuple[str, int, int]]:
    """``(chunk_id, start, end)`` of each returned chunk's block in a lookup_knowledge output."""
    returned = _returned_chunk_ids(summary)
    headers = []
    for match in _BLOCK_HEADER.finditer(output or ""):
        chunk_id = match.group(1).strip()
        if returned is None or chunk_id in returned:
            headers.append((chunk_id, match.start()))
    blocks = []
    for k, (chunk_id, start) in enumerate(headers):
        end = headers[k + 1][1] if k + 1 < len(headers) else len(output)
        blocks.append((chunk_id, start, end))
    return blocks


def _kind(tool_name: str) -> str:
    if tool_name in EVIDENCE_TOOLS:
        return _KIND_EVIDENCE
    if tool_name == KNOWLEDGE_TOOL:
        return _KIND_KNOWLEDGE
    return _KIND_OTHER


@dataclass(frozen=True)
class _Target:
    record: InvocationRecord
    block: tuple[int, int] | None  # span of the chunk's block, or None for the whole output


class _Checker:
    def __init__(
        self,
        records: Sequence[InvocationRecord],
        session_id: int,
        foreign_ids: Collection[int],
    ) -> None:
        self.session_id = session_id
        self.by_id: dict[int, InvocationRecord] = {}
        self.by_trace: dict[str, InvocationRecord] = {}
        self.foreign: set[int] = set()
        for fid in foreign_ids or ():
            if isinstance(fid, int) and not isinstance(fid, bool):
                self.foreign.add(fid)
        for record in records or ():
            if not isinstance(record, InvocationRecord):
                continue
            if record.session_id != session_id:
                self.foreign.add(record.id)
                continue
            self.by_id.setdefault(record.id, record)
            self.by_trace.setdefault(str(record.trace_ref).strip(), record)
        self.foreign -= set(self.by_id)
        self._chunks: dict[str, list[_Target]] | None = None
        self._normalized: dict[tuple[int, tuple[int, int] | None], str] = {}

    # -- lookups
    def chunks(self) -> dict[str, list[_Target]]:
        if self._chunks is None:
            self._chunks = {}
            for record in self.by_id.values():
                if record.tool_name != KNOWLEDGE_TOOL:
                    continue
                for chunk_id, start, end in knowledge_blocks(record.output or "", record.summary):
                    self._chunks.setdefault(chunk_id, []).append(_Target(record, (start, end)))
        return self._chunks

    def normalized(self, target: _Target) -> str:
        key = (target.record.id, target.block)
        cached = self._normalized.get(key)
        if cached is None:
            output = target.record.output or ""
            if target.block is not None:
                output = output[target.block[0] : target.block[1]]
            cached = self._normalized[key] = normalize_text(output)
        return cached

    # -- one binding
    def _target_check(self, binding: EvidenceBinding, target: _Target, index: int) -> list[Finding]:
        record = target.record
        findings = []
        tool_name = (binding.tool_name or "").strip()
        if tool_name and tool_name.lower() != record.tool_name.lower():
            findings.append(
                finding(
                    FindingCode.TOOL_NAME_MISMATCH,
                    f"binding says {tool_name!r}, {record.trace_ref} is {record.tool_name!r}",
                    index,
                )
            )
        if record.status != STATUS_OK:
            findings.append(
                finding(
                    FindingCode.INVOCATION_FAILED,
                    f"{record.trace_ref} ({record.tool_name}) ended with status {record.status!r}",
                    index,
                )
            )
        result = _match(binding.evidence_excerpt, self.normalized(target))
        if not result.matched:
            where = record.trace_ref
            if target.block is not None:
                where = f"chunk {binding.source_id!r} of {record.trace_ref}"
            findings.append(finding(result.code or "", f"{where}: {result.detail}", index))
        return findings

    def binding_check(
        self, binding: EvidenceBinding, index: int
    ) -> tuple[list[Finding], str | None]:
        """Findings for one binding, and the kind of a valid one (None when invalid)."""
        source_type = binding.source_type.strip().lower()
        source_id = binding.source_id.strip()
        if source_type == SourceType.TOOL_TRACE.value:
            record = self.by_trace.get(source_id)
            targets = [_Target(record, None)] if record else []
            unknown = f"no invocation of this session has trace_ref {source_id!r}"
        elif source_type == SourceType.LOOKUP_EVIDENCE_BLOCK.value:
            targets = list(self.chunks().get(source_id, []))
            unknown = (
                f"chunk {source_id!r} was not returned by a lookup_knowledge invocation "
                "of this session"
            )
        else:
            detail = (
                f"source_type {binding.source_type!r} is not tool_trace or lookup_evidence_block"
            )
            return [finding(FindingCode.UNKNOWN_SOURCE_TYPE, detail, index)], None

        findings: list[Finding] = []
        cited_here: set[int] = set()
        for inv_id in dict.fromkeys(binding.source_invocation_ids or []):
            if inv_id in self.by_id:
                cited_here.add(inv_id)
            elif inv_id in self.foreign:
                findings.append(
                    finding(
                        FindingCode.INVOCATION_NOT_IN_SESSION,
                        f"invocation {inv_id} belongs to another session",
                        index,
                    )
                )
            else:
                findings.append(
                    finding(
                        FindingCode.UNKNOWN_SOURCE_ID, f"invocation {inv_id} does not exist", index
                    )
                )
        if not targets:
            findings.append(finding(FindingCode.UNKNOWN_SOURCE_ID, unknown, index))
            return findings, None
        if cited_here:
            target_ids = {t.record.id for t in targets}
            for inv_id in sorted(cited_here - target_ids):
                other = self.by_id[inv_id]
                findings.append(
                    finding(
                        FindingCode.SOURCE_ID_MISMATCH,
                        f"source_id {source_id!r} is not invocation {inv_id} "
                        f"({other.trace_ref}, {other.tool_name})",
                        index,
                    )
                )
            narrowed = [t for t in targets if t.record.id in cited_here]
            targets = narrowed or targets
        best: list[Finding] | None = None
        kind: str | None = None
        for target in targets:
            target_findings = self._target_check(binding, target, index)
            if not target_findings:
                best = []
                kind = _kind(target.record.tool_name)
                break
            if best is None or len(target_findings) < len(best):
                best = target_findings
        findings.extend(best or [])
        if findings:
            return findings, None
        return findings, kind

    # -- one claim
    def claim_check(
        self, claim: Claim, notes: ClaimNotes, duplicate: bool
    ) -> GatekeeperClaimResult:
        findings = list(notes.findings)
        demote = notes.demote
        known_types = {t.value for t in ClaimType}
        if claim.claim_type not in known_types and not any(
            f.code == FindingCode.UNKNOWN_CLAIM_TYPE.value for f in findings
        ):
            findings.append(
                finding(FindingCode.UNKNOWN_CLAIM_TYPE, f"claim_type {claim.claim_type!r}")
            )
        if duplicate:
            demote = True
            findings.append(
                finding(
                    FindingCode.DUPLICATE_CLAIM_ID,
                    f"an earlier claim already has id {claim.claim_id!r}; this one is demoted",
                )
            )
        kinds: list[str] = []
        bindings = claim.evidence_bindings or []
        origins = notes.binding_origins
        for position, binding in enumerate(bindings):
            index = origins[position] if position < len(origins) else position
            binding_findings, kind = self.binding_check(binding, index)
            findings.extend(binding_findings)
            if kind is not None:
                kinds.append(kind)
        if not bindings:
            demote = True
            findings.append(finding(FindingCode.NO_BINDINGS, "the claim has no evidence bindings"))
        level = str(claim.support_level).strip().lower()
        if level in (SupportLevel.INDIRECT.value, SupportLevel.NONE.value):
            if not kinds:
                demote = True
        elif _KIND_EVIDENCE not in kinds:
            demote = True
            if kinds:
                findings.append(
                    finding(
                        FindingCode.KNOWLEDGE_ONLY_BINDING,
                        "a direct claim needs a valid binding to query_metrics or query_logs; "
                        "runbook text cannot confirm what is happening now",
                    )
                )
        return GatekeeperClaimResult(
            claim_id=claim.claim_id,
            verdict=Verdict.DEMOTED if demote else Verdict.ACCEPTED,
            valid_bindings=len(kinds),
            findings=findings,
        )


def _status_of(parsed: object) -> ParseStatus:
    try:
        return ParseStatus(parsed.status)  # type: ignore[attr-defined]
    except Exception:
        return ParseStatus.SCHEMA_INVALID


def _claims_of(parsed: object) -> list[Claim]:
    output = getattr(parsed, "output", None)
    claims = getattr(output, "claims", None)
    return [c for c in claims if isinstance(c, Claim)] if isinstance(claims, list) else []


def _report(status: ParseStatus, results: list[GatekeeperClaimResult], findings: list[Finding]):
    accepted = sum(1 for r in results if r.verdict == Verdict.ACCEPTED)
    return GatekeeperReport(
        parse_status=status,
        claims=results,
        findings=findings,
        counts=GatekeeperCounts(
            claims=len(results), accepted=accepted, demoted=len(results) - accepted
        ),
    )


def _internal_error_report(parsed: object, exc: BaseException) -> GatekeeperReport:
    detail = f"the Gatekeeper failed ({type(exc).__name__}); every claim is demoted"
    try:
        results = [
            GatekeeperClaimResult(
                claim_id=str(c.claim_id),
                verdict=Verdict.DEMOTED,
                findings=[finding(FindingCode.INTERNAL_ERROR, detail)],
            )
            for c in _claims_of(parsed)
        ]
    except Exception:
        results = []
    return _report(_status_of(parsed), results, [finding(FindingCode.INTERNAL_ERROR, detail)])


def gatekeeper_check(
    *,
    parsed: ParsedExecutorOutput,
    invocations: Sequence[InvocationRecord],
    session_id: int,
    foreign_invocation_ids: Collection[int] = (),
) -> GatekeeperReport:
    """Check every claim of ``parsed`` against this session's invocations. Pure; never raises.

    ``invocations`` are this session's (records of another session are treated
    as foreign); ``foreign_invocation_ids`` are cited ids known to exist in
    other sessions (they give ``invocation_not_in_session`` rather than
    ``unknown_source_id``).
    """
    try:
        status = _status_of(parsed)
        findings = [f for f in (getattr(parsed, "dropped", None) or []) if isinstance(f, Finding)]
        if status not in (ParseStatus.PARSED_V2, ParseStatus.PARSED_V1):
            return _report(status, [], findings)
        checker = _Checker(invocations, session_id, foreign_invocation_ids)
        notes: tuple[ClaimNotes, ...] = tuple(getattr(parsed, "claim_notes", ()) or ())
        results: list[GatekeeperClaimResult] = []
        seen: set[str] = set()
        for position, claim in enumerate(_claims_of(parsed)):
            claim_notes = notes[position] if position < len(notes) else ClaimNotes()
            try:
                result = checker.claim_check(claim, claim_notes, duplicate=claim.claim_id in seen)
            except Exception as exc:
                result = GatekeeperClaimResult(
                    claim_id=str(claim.claim_id),
                    verdict=Verdict.DEMOTED,
                    findings=[finding(FindingCode.INTERNAL_ERROR, type(exc).__name__)],
                )
            seen.add(claim.claim_id)
            results.append(result)
        return _report(status, results, findings)
    except Exception as exc:
        return _internal_error_report(parsed, exc)


def gatekeeper_accepted_claims(
    parsed: ParsedExecutorOutput, report: GatekeeperReport
) -> list[Claim]:
    """The claims the Gatekeeper accepted, by position (safe with duplicate ids)."""
    claims = _claims_of(parsed)
    if len(claims) != len(report.claims):
        return []
    return [
        claim
        for claim, result in zip(claims, report.claims, strict=True)
        if result.verdict == Verdict.ACCEPTED and result.claim_id == claim.claim_id
    ]


def _cited_ids(parsed: ParsedExecutorOutput) -> set[int]:
    ids: set[int] = set()
    try:
        for claim in _claims_of(parsed):
            for binding in claim.evidence_bindings or []:
                for inv_id in binding.source_invocation_ids or []:
                    if isinstance(inv_id, int) and 0 < inv_id <= _MAX_DB_ID:
                        ids.add(inv_id)
    except Exception:  # gatekeeper_check reports a malformed parse result itself
        return set()
    return ids


def gatekeeper_run(*, session: DiagnosisSession, parsed: ParsedExecutorOutput) -> GatekeeperReport:
    """Check ``parsed`` against the session's invocations and store the report on the session."""
    from diagnosis.models import ToolInvocation

    rows = ToolInvocation.objects.filter(session_id=session.pk).values_list(
        "id", "session_id", "trace_ref", "tool_name", "status", "output", "summary"
    )
    records = [
        InvocationRecord(
            id=row[0],
            session_id=row[1],
            trace_ref=row[2],
            tool_name=row[3],
            status=row[4],
            output=row[5] or "",
            summary=row[6] if isinstance(row[6], dict) else {},
        )
        for row in rows
    ]
    elsewhere = sorted(_cited_ids(parsed) - {r.id for r in records})[:_MAX_LOOKUP_IDS]
    foreign: set[int] = set()
    if elsewhere:
        foreign = set(
            ToolInvocation.objects.filter(id__in=elsewhere)
            .exclude(session_id=session.pk)
            .values_list("id", flat=True)
        )
    report = gatekeeper_check(
        parsed=parsed, invocations=records, session_id=session.pk, foreign_invocation_ids=foreign
    )
    evaluation: dict[str, Any] = (
        dict(session.self_evaluation) if isinstance(session.self_evaluation, dict) else {}
    )
    evaluation["gatekeeper"] = report.model_dump(mode="json")
    session.self_evaluation = evaluation
    session.save(update_fields=["self_evaluation"])
    return report
