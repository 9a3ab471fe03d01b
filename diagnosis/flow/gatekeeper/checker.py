"""The Gatekeeper's checker: one claim's bindings, its support level's rules and its facts.

``gatekeeper_check`` (the package) builds one ``ClaimChecker`` per Executor output
and asks it for each claim's ``GatekeeperClaimResult``; the rules it applies, and
the decisions where docs/contracts.md §2 is silent, are in the package's docstring.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from diagnosis.contracts import (
    Claim,
    ClaimFact,
    ClaimType,
    EvidenceBinding,
    Finding,
    FindingCode,
    GatekeeperClaimResult,
    Hypothesis,
    SourceType,
    SupportLevel,
    Verdict,
)
from diagnosis.evidence.families import Statement, kind_evidenced, statements_read
from diagnosis.facts import (
    FactKind,
    FactSource,
    fact_is_compound,
    facts_extract,
    text_normalize,
    text_normalize_cased,
)
from diagnosis.flow.gatekeeper.excerpts import MatchResult, _match, excerpt_fragments
from diagnosis.flow.gatekeeper.instructions import excerpt_is_instruction
from diagnosis.flow.gatekeeper.invocations import (
    KIND_EVIDENCE,
    KIND_KNOWLEDGE,
    STATUS_OK,
    InvocationRecord,
    knowledge_blocks,
    tool_kind,
)
from diagnosis.flow.parsing import ClaimNotes, evidence_numbers, finding

_ARGUMENT_FACTS = frozenset({FactKind.IDENTIFIER, FactKind.SERVICE})


def _where(record: InvocationRecord, chunk: str | None) -> dict[str, str]:
    """The location parameters of a detail: the invocation, and the chunk when there is one."""
    return {"trace_ref": record.trace_ref, **({"chunk": chunk} if chunk is not None else {})}


@dataclass(frozen=True)
class _Target:
    record: InvocationRecord
    block: tuple[int, int] | None  # span of the chunk's block, or None for the whole output


def _target_output(target: _Target) -> str:
    """The tool output a target points into: the whole output, or its block."""
    output = target.record.output or ""
    if target.block is not None:
        output = output[target.block[0] : target.block[1]]
    return output


@dataclass
class _Valid:
    """A valid binding: where its excerpt matched, and what it may bind."""

    index: int
    kind: str
    target: _Target
    spans: tuple[tuple[int, int], ...]
    _excerpt: FactSource | None = field(default=None, repr=False)

    def excerpt(self, checker: ClaimChecker) -> FactSource:
        """The regions of the output the excerpt matched (built when the facts are checked)."""
        if self._excerpt is None:
            self._excerpt = FactSource()
            text = checker.normalized(self.target)
            for start, end in self.spans:
                self._excerpt.region_add(text, start, end)
        return self._excerpt


def _argument_texts(arguments: object) -> Iterable[str]:
    """The values of a tool call's arguments, free-text ``query`` included (docs/contracts.md §2).

    A call that returned output found data for what it named, so the identifiers
    and service names its arguments name are bound; numbers, times and dates in
    them are requests (the window, ``limit``), and ``facts_check`` never looks
    for those here.
    """
    if not isinstance(arguments, dict):
        return
    for value in arguments.values():
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):  # labels
            for label, label_value in value.items():
                yield f"{label}={label_value}"
        elif isinstance(value, list):
            yield from (str(item) for item in value if isinstance(item, str | int))


class ClaimChecker:
    def __init__(
        self,
        records: Sequence[InvocationRecord],
        session_id: int,
        foreign_ids: Collection[int],
        services: Iterable[str] = (),
    ) -> None:
        self.session_id = session_id
        self.services = [s for s in services or () if isinstance(s, str) and s.strip()]
        self.services_normalized = [text_normalize(s) for s in self.services]
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
        self._statements: dict[tuple[int, tuple[int, int] | None], list[Statement]] = {}
        self._arguments: dict[int, FactSource] = {}
        self._session_source: FactSource | None = None

    # -- lookups
    def chunks(self) -> dict[str, list[_Target]]:
        if self._chunks is None:
            self._chunks = {}
            for record in self.by_id.values():
                if tool_kind(record.tool_name) != KIND_KNOWLEDGE:
                    continue
                for chunk_id, start, end in knowledge_blocks(record.output or "", record.summary):
                    self._chunks.setdefault(chunk_id, []).append(_Target(record, (start, end)))
        return self._chunks

    def normalized(self, target: _Target) -> str:
        key = (target.record.id, target.block)
        cached = self._normalized.get(key)
        if cached is None:
            cached = self._normalized[key] = text_normalize(_target_output(target))
        return cached

    def statements(self, target: _Target) -> list[Statement]:
        """The series and template statements of the target's output (``families``)."""
        key = (target.record.id, target.block)
        cached = self._statements.get(key)
        if cached is None:
            services = tuple(self.services_normalized)
            # its capitals kept, at the normalised text's positions: they separate a name's
            # words (``memUsedPercent``) as the engine reads them
            text = text_normalize_cased(_target_output(target), self.normalized(target))
            cached = self._statements[key] = statements_read(text, services=services)
        return cached

    def arguments(self, record: InvocationRecord) -> FactSource:
        cached = self._arguments.get(record.id)
        if cached is None:
            cached = self._arguments[record.id] = FactSource()
            for text in _argument_texts(record.arguments):
                cached.region_add(text_normalize(text))
        return cached

    # -- one binding
    def _target_check(
        self, binding: EvidenceBinding, target: _Target, index: int
    ) -> tuple[list[Finding], MatchResult | None]:
        record = target.record
        findings = []
        tool_name = (binding.tool_name or "").strip()
        if tool_name and tool_name.lower() != record.tool_name.lower():
            findings.append(
                finding(
                    FindingCode.TOOL_NAME_MISMATCH,
                    f"binding says {tool_name!r}, {record.trace_ref} is {record.tool_name!r}",
                    index,
                    detail_code="tool_name_mismatch",
                    params={
                        "tool": tool_name,
                        "trace_ref": record.trace_ref,
                        "actual": record.tool_name,
                    },
                )
            )
        if record.status != STATUS_OK:
            findings.append(
                finding(
                    FindingCode.INVOCATION_FAILED,
                    f"{record.trace_ref} ({record.tool_name}) ended with status {record.status!r}",
                    index,
                    detail_code="invocation_failed",
                    params={
                        "trace_ref": record.trace_ref,
                        "tool": record.tool_name,
                        "status": record.status,
                    },
                )
            )
        result = _match(binding.evidence_excerpt, self.normalized(target))
        where = record.trace_ref
        chunk = binding.source_id if target.block is not None else None
        if chunk is not None:
            where = f"chunk {chunk!r} of {record.trace_ref}"
        if not result.matched:
            findings.append(
                finding(
                    result.code or "",
                    f"{where}: {result.detail}",
                    index,
                    detail_code=result.detail_code or str(result.code),
                    params={**result.params, **_where(record, chunk)},
                )
            )
            return findings, None
        phrase = excerpt_is_instruction(
            " ".join(excerpt_fragments(text_normalize(binding.evidence_excerpt)))
        )
        if phrase:
            findings.append(
                finding(
                    FindingCode.EXCERPT_IS_INSTRUCTION,
                    f"{where}: the excerpt reads as an instruction or a verdict ({phrase!r}), "
                    "not as evidence",
                    index,
                    detail_code="excerpt_is_instruction",
                    params={"phrase": phrase, **_where(record, chunk)},
                )
            )
        return findings, result

    def _targets(
        self, binding: EvidenceBinding, index: int
    ) -> tuple[list[_Target] | None, Finding]:
        """What the binding's source names (None: an unknown source type), and the finding
        when it names nothing of this session."""
        source_type = binding.source_type.strip().lower()
        source_id = binding.source_id.strip()
        if source_type == SourceType.TOOL_TRACE.value:
            record = self.by_trace.get(source_id)
            unknown = f"no invocation of this session has trace_ref {source_id!r}"
            return [_Target(record, None)] if record else [], finding(
                FindingCode.UNKNOWN_SOURCE_ID,
                unknown,
                index,
                detail_code="unknown_trace_ref",
                params={"source_id": source_id},
            )
        if source_type == SourceType.LOOKUP_EVIDENCE_BLOCK.value:
            unknown = (
                f"chunk {source_id!r} was not returned by a lookup_knowledge invocation "
                "of this session"
            )
            return list(self.chunks().get(source_id, [])), finding(
                FindingCode.UNKNOWN_SOURCE_ID,
                unknown,
                index,
                detail_code="unknown_chunk",
                params={"source_id": source_id},
            )
        detail = f"source_type {binding.source_type!r} is not tool_trace or lookup_evidence_block"
        return None, finding(
            FindingCode.UNKNOWN_SOURCE_TYPE,
            detail,
            index,
            detail_code="unknown_source_type",
            params={"source_type": binding.source_type},
        )

    def _cited(self, binding: EvidenceBinding, index: int) -> tuple[set[int], list[Finding]]:
        """The cited invocation ids of this session, and a finding for each other one."""
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
                        detail_code="invocation_not_in_session",
                        params={"invocation": inv_id},
                    )
                )
            else:
                findings.append(
                    finding(
                        FindingCode.UNKNOWN_SOURCE_ID,
                        f"invocation {inv_id} does not exist",
                        index,
                        detail_code="unknown_invocation",
                        params={"invocation": inv_id},
                    )
                )
        return cited_here, findings

    def binding_check(
        self, binding: EvidenceBinding, index: int
    ) -> tuple[list[Finding], _Valid | None]:
        """Findings for one binding, and the valid binding (None when invalid)."""
        source_id = binding.source_id.strip()
        targets, unknown = self._targets(binding, index)
        if targets is None:
            return [unknown], None
        cited_here, findings = self._cited(binding, index)
        if not targets:
            findings.append(unknown)
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
                        detail_code="source_id_mismatch",
                        params={
                            "source_id": source_id,
                            "invocation": inv_id,
                            "trace_ref": other.trace_ref,
                            "tool": other.tool_name,
                        },
                    )
                )
            narrowed = [t for t in targets if t.record.id in cited_here]
            targets = narrowed or targets
        best: list[Finding] | None = None
        valid: _Valid | None = None
        for target in targets:
            target_findings, result = self._target_check(binding, target, index)
            if not target_findings and result is not None:
                best = []
                valid = _Valid(index, tool_kind(target.record.tool_name), target, result.spans)
                break
            if best is None or len(target_findings) < len(best):
                best = target_findings
        findings.extend(best or [])
        if findings or valid is None:
            return findings, None
        return findings, valid

    # -- the claim's facts
    def facts_check(
        self, claim: Claim, valid: list[_Valid], direct: bool
    ) -> tuple[list[ClaimFact], list[Finding]]:
        facts = facts_extract(claim.claim_text or "", services=self.services)
        bound: list[ClaimFact] = []
        findings: list[Finding] = []
        for fact in facts:
            where: tuple[int, str] | None = None
            for item in valid:
                if item.excerpt(self).contains(fact):
                    where = (item.index, "excerpt")
                    break
            if where is None and fact.kind in _ARGUMENT_FACTS:
                for item in valid:
                    # a runbook search's arguments say what was looked up, not what was seen
                    if item.kind != KIND_EVIDENCE:
                        continue
                    if self.arguments(item.target.record).contains(fact):
                        where = (item.index, "argument")
                        break
            bound.append(
                ClaimFact(
                    text=fact.text,
                    kind=fact.kind.value,
                    start=fact.start,
                    end=fact.end,
                    binding=where[0] if where else None,
                    via=where[1] if where else None,  # type: ignore[arg-type]
                )
            )
            if where is None:
                indexes = sorted({v.index for v in valid})
                unbound = finding(
                    FindingCode.CLAIM_FACT_UNBOUND,
                    f"{fact.text!r} is in no bound excerpt ({evidence_numbers(indexes)})",
                    detail_code="claim_fact_unbound",
                    params={"fact": fact.text, "bindings": indexes},
                )
                findings.append(unbound.model_copy(update={"fact": fact.text}))
        if direct and not facts:
            findings.append(
                finding(
                    FindingCode.CLAIM_NOT_SPECIFIC,
                    "the claim names no service, number, time or identifier its evidence "
                    "could bind; a confirmed claim must name something concrete",
                    detail_code="claim_not_specific",
                )
            )
        return bound, findings

    # -- the claim's kind
    def _about(self, record: InvocationRecord, text: str, entity: str) -> bool:
        """Whether a matched excerpt ``text`` of ``record``'s output is about ``entity``: it
        names it, or it names no service of the environment and its call was for ``entity``
        or for every service (a fleet-view line's other columns)."""
        if entity in text:
            return True
        if any(o and o not in entity and o in text for o in self.services_normalized):
            return False
        arguments = record.arguments
        service = arguments.get("service") if isinstance(arguments, dict) else None
        return (
            not isinstance(service, str)
            or not service.strip()
            or (text_normalize(service) == entity)
        )

    def _evidence_shows(self, kind: str, entity: str) -> bool:
        """Whether any successful metrics, logs or traces output of the session holds a
        statement of ``kind`` about ``entity`` (``families.kind_evidenced``, each statement
        read whole; an output without statements line by line)."""
        for record in self.by_id.values():
            if tool_kind(record.tool_name) != KIND_EVIDENCE or record.status != STATUS_OK:
                continue
            target = _Target(record, None)
            text = self.normalized(target)
            statements = self.statements(target)
            regions = [(s.start, s.end) for s in statements if kind in s.shows]
            if not statements:
                lines = (text_normalize(line) for line in (record.output or "").splitlines())
                regions = (
                    [(0, len(text))]
                    if any(
                        kind_evidenced(kind, line, (0, len(line)), [])
                        and self._about(record, line, entity)
                        for line in lines
                    )
                    else []
                )
            if any(self._about(record, text[start:end], entity) for start, end in regions):
                return True
        return False

    def session_source(self) -> FactSource:
        """Every successful output of the session (evidence and runbooks) and its calls'
        arguments, as one source of facts."""
        if self._session_source is None:
            source = FactSource()
            for record in self.by_id.values():
                if record.status == STATUS_OK:
                    source.region_add(self.normalized(_Target(record, None)))
                    source.regions.extend(self.arguments(record).regions)
            self._session_source = source
        return self._session_source

    def hypothesis_facts_check(self, hypothesis: Hypothesis, position: int) -> list[Finding]:
        """A hypothesis's text and basis state only facts the session's outputs hold.

        A hypothesis is unconfirmed, but the figures, times and identifiers it gives are
        stated as seen ("p99 升高到 1.02 s", "始于 10:04"): with no bindings, the outputs they
        could come from are every successful call of the session (its evidence, its
        runbooks, the arguments it was made with). A fact none holds is invented. Naming a
        service is no fact about the evidence (the environment names them), and neither is a
        word of letters joined by hyphens (``fact_is_compound``): it is how English writes a
        compound ("round-trip time", "a knock-on effect") as much as how a service is named,
        and a hypothesis is prose. Figures, times, dates and identifiers that prose never
        writes (``HikariPool-7``, ``ORA-00060``, ``p99``) are still checked. The Composer
        input filter drops a hypothesis whose text invents a fact, as a claim with invented
        evidence never becomes a hypothesis, and withholds a basis that does.
        """
        source = self.session_source()
        findings: list[Finding] = []
        for part, text in (("text", hypothesis.hypothesis_text), ("basis", hypothesis.basis)):
            unbound = [
                fact.text
                for fact in facts_extract(text or "", services=self.services)
                if fact.kind != FactKind.SERVICE
                and not fact_is_compound(fact)
                and not source.contains(fact)
            ]
            if unbound:
                findings.append(
                    finding(
                        FindingCode.HYPOTHESIS_FACT_UNBOUND,
                        f"hypothesis {position}: its {part} states {unbound[0]!r}, which no "
                        "output of the session holds",
                        detail_code=f"hypothesis_{part}_fact_unbound",
                        params={"hypothesis": position, "part": part, "fact": unbound[0]},
                    )
                )
        return findings

    def hypothesis_kind_check(self, hypothesis: Hypothesis, position: int) -> list[Finding]:
        """A hypothesis's ``root_cause_kind`` needs evidence of it about its service in the
        session's tool outputs (``_evidence_shows``).

        A hypothesis has no bindings, but the kind it gives is still a statement about what
        the service ran out of or got wrong: the answer words it ("类型：内存"), so the
        evidence of that kind must exist somewhere the session looked, about that service.
        Its basis is the model's own text and shows nothing by itself. One of the pair
        suffices: a hypothesis that names the other reading of a claim's evidence ("code
        rather than errors", its alternative the kind the evidence shows) gives the kind
        no series could rule out, which no output can show, as a claim's alternative. Not a
        demotion (a hypothesis is not confirmed): the Composer input filter drops the kinds
        and keeps the hypothesis.
        """
        kind = (hypothesis.root_cause_kind or "").strip()
        other = (hypothesis.root_cause_kind_alternative or "").strip()
        entity = text_normalize(hypothesis.entity or "")
        if not kind or not entity or self._evidence_shows(kind, entity):
            return []
        if other and self._evidence_shows(other, entity):
            return []
        return [
            finding(
                FindingCode.HYPOTHESIS_KIND_UNSHOWN,
                f"hypothesis {position}: the kind {kind!r} is shown by no metrics, logs or "
                f"traces output about {hypothesis.entity}",
                detail_code="hypothesis_kind_unshown",
                params={"hypothesis": position, "kind": kind, "entity": hypothesis.entity or "-"},
            )
        ]

    def kind_check(self, claim: Claim, valid: list[_Valid]) -> list[Finding]:
        """A stated ``root_cause_kind`` is a fact of the claim: some valid metrics or logs
        excerpt about the claim's service must show it (``families.kind_evidenced``).

        The kind says what the service ran out of or got wrong; the only evidence of that
        is a series or a log line of that family on that service, read by the rule the
        engine reads kinds by: a series of that family that shifted, or a template of it.
        Runbook text says what could be, not what is (it cannot show a kind, as it cannot
        confirm a claim), and the claim's own words are the conclusion, not its evidence.
        The alternative kind (the one the evidence cannot tell the kind from) is not checked
        here: it is said because a series that would rule it out is absent, which no
        excerpt can show; the answer's coherence check asks for its reason.
        """
        kind = claim.root_cause_kind
        if not kind or not valid:
            return []
        entity = text_normalize(claim.entity or "")
        for item in valid:
            if item.kind != KIND_EVIDENCE:
                continue
            normalized = self.normalized(item.target)
            statements = self.statements(item.target)
            for start, end in item.spans:
                shown = kind_evidenced(kind, normalized, (start, end), statements)
                if shown and (
                    not entity or self._about(item.target.record, normalized[start:end], entity)
                ):
                    return []
        indexes = sorted({v.index for v in valid})
        about = claim.entity or "-"
        return [
            finding(
                FindingCode.KIND_UNBOUND,
                f"the kind {kind!r} is shown by no bound metrics or logs excerpt about {about} "
                f"({evidence_numbers(indexes)})",
                detail_code="kind_unbound",
                params={"kind": kind, "entity": about, "bindings": indexes},
            )
        ]

    # -- one claim
    def _bindings_check(
        self, claim: Claim, notes: ClaimNotes
    ) -> tuple[list[_Valid], list[int], list[Finding]]:
        """Each binding checked: the valid ones, the indexes of the invalid, their findings."""
        valid: list[_Valid] = []
        invalid: list[int] = []
        findings: list[Finding] = []
        origins = notes.binding_origins
        for position, binding in enumerate(claim.evidence_bindings or []):
            index = origins[position] if position < len(origins) else position
            binding_findings, item = self.binding_check(binding, index)
            findings.extend(binding_findings)
            if item is None:
                invalid.append(index)
            else:
                valid.append(item)
        return valid, invalid, findings

    def claim_check(
        self, claim: Claim, notes: ClaimNotes, duplicate: bool
    ) -> GatekeeperClaimResult:
        """One claim: its parse findings, its bindings, its support level's rules, its facts."""
        findings = _claim_notes_findings(claim, notes, duplicate)
        demote = notes.demote or duplicate
        valid, invalid, binding_findings = self._bindings_check(claim, notes)
        findings.extend(binding_findings)
        kinds = [v.kind for v in valid]
        if not claim.evidence_bindings:
            demote = True
            findings.append(
                finding(
                    FindingCode.NO_BINDINGS,
                    "the claim has no evidence bindings",
                    detail_code="no_bindings",
                )
            )
        level = str(claim.support_level).strip().lower()
        direct = level not in (SupportLevel.INDIRECT.value, SupportLevel.NONE.value)
        # an instruction quoted as evidence is invented evidence: the claim built on it is
        # not trusted at any support level, whatever its other bindings (docs/contracts.md §2)
        if any(f.code == FindingCode.EXCERPT_IS_INSTRUCTION.value for f in binding_findings):
            demote = True
        if not direct:
            demote = demote or not kinds
        else:
            support = _support_findings(kinds, invalid)
            demote = demote or KIND_EVIDENCE not in kinds or bool(valid and invalid)
            findings.extend(support)
        facts: list[ClaimFact] = []
        if valid:
            facts, fact_findings = self.facts_check(claim, valid, direct)
            if fact_findings:
                demote = True
                findings.extend(fact_findings)
            kind_findings = self.kind_check(claim, valid)
            if kind_findings:
                demote = True
                findings.extend(kind_findings)
        return GatekeeperClaimResult(
            claim_id=claim.claim_id,
            verdict=Verdict.DEMOTED if demote else Verdict.ACCEPTED,
            valid_bindings=len(kinds),
            findings=findings,
            facts=facts,
        )


def _claim_notes_findings(claim: Claim, notes: ClaimNotes, duplicate: bool) -> list[Finding]:
    """Parse findings, an unknown claim type, a duplicate id: in that order."""
    findings = list(notes.findings)
    known_types = {t.value for t in ClaimType}
    if claim.claim_type not in known_types and not any(
        f.code == FindingCode.UNKNOWN_CLAIM_TYPE.value for f in findings
    ):
        findings.append(
            finding(
                FindingCode.UNKNOWN_CLAIM_TYPE,
                f"claim_type {claim.claim_type!r}",
                detail_code="unknown_claim_type",
                params={"claim_type": str(claim.claim_type)},
            )
        )
    if duplicate:
        findings.append(
            finding(
                FindingCode.DUPLICATE_CLAIM_ID,
                f"an earlier claim already has id {claim.claim_id!r}; this one is demoted",
                detail_code="duplicate_claim_id",
                params={"claim_id": claim.claim_id},
            )
        )
    return findings


def _support_findings(kinds: list[str], invalid: list[int]) -> list[Finding]:
    """What a direct claim's bindings lack: observed evidence, or every binding valid."""
    findings: list[Finding] = []
    if KIND_EVIDENCE not in kinds and kinds:
        findings.append(
            finding(
                FindingCode.KNOWLEDGE_ONLY_BINDING,
                "a direct claim needs a valid binding to query_metrics or query_logs; "
                "runbook text cannot confirm what is happening now",
                detail_code="knowledge_only_binding",
            )
        )
    if kinds and invalid:
        findings.append(
            finding(
                FindingCode.INVALID_BINDING_BESIDE_VALID,
                f"{evidence_numbers(invalid)} is invalid: a confirmed claim is not trusted on the "
                "strength of its other bindings",
                detail_code="invalid_binding_beside_valid",
                params={"bindings": list(invalid)},
            )
        )
    return findings
