"""The coherence check: an answer read as an SRE reads it never contradicts itself.

Code after the Composer and the renderer (``diagnosis.flow.composer``). Each
rule is a contradiction a reader sees without knowing the system:

- ``badge_conclusion_mismatch``: the answer's one certainty
  (``ComposerInput.certainty``: what the badge shows) disagrees with its
  conclusion: a confirmed root cause whose conclusion opens with a hedge, or a
  conclusion that calls the root cause confirmed when it is not;
- ``stacked_hedges``: two hedges on one statement ("（尚待证实）：可能：") say
  the same uncertainty twice and read as two different ones;
- ``hedged_confirmation``: a hedge next to a confirmation ("可能：根因已确认");
- ``series_two_figures``: one series given two different ratios to its
  baseline in one answer (the figure is computed once per series); in an item
  naming several services a ratio is the one its own clause names, else the item's
  subject's;
- ``peak_before_onset``: a stated maximum whose time is before the onset the
  same statement gives, unless it says the peak came before the change;
- ``kind_without_evidence``: a cause's kind (memory, CPU, …) whose evidence
  names nothing of that kind: a claim's own text (without the kind it names,
  "（类型：…）"), a hypothesis's basis (its text is often worded from the kind
  itself). A cause the evidence cannot tell from a second kind names both
  (``root_cause_kind_alternative``): that is no contradiction, and the second kind
  needs its evidence too, in the same statement or in a hypothesis of that kind
  about the same service (the basis of "…or network" says no network counter was
  there to rule it out).

Markers are matched on ``text_normalize``d text, in both answer languages.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from diagnosis.contracts import (
    CAUSE_CLAIM_TYPES,
    AllowedClaim,
    AllowedHypothesis,
    Certainty,
    CoherenceCode,
    CoherenceFinding,
    ComposerInput,
)
from diagnosis.evidence.vocab import kind_shown
from diagnosis.facts import Fact, FactKind, facts_extract, text_normalize

# hedge markers: words that say a statement is not established
HEDGES = (
    "可能",
    "也许",
    "或许",
    "疑似",
    "尚待证实",
    "待证实",
    "推断",
    "likely",
    "possibly",
    "probably",
    "unconfirmed",
    "inferred",
    "perhaps",
)
# confirmation phrases: words that say the root cause is established
CONFIRMATIONS = (
    "根因已确认",
    "已确认根因",
    "根因已经确认",
    "root cause confirmed",
    "root cause is confirmed",
    "confirmed root cause",
)
# what may stand between two markers that read as one statement's: spaces and punctuation
_JOINER = r"[\s:：,，;；()（）\[\]【】\"'“”‘’「」*_-]{0,4}"
_HEDGE = "|".join(re.escape(h) for h in sorted(HEDGES, key=len, reverse=True))
_CONFIRM = "|".join(re.escape(c) for c in CONFIRMATIONS)
_WORD_EDGE = r"(?<![a-z])"
_STACKED = re.compile(
    rf"{_WORD_EDGE}(?:{_HEDGE}){_JOINER}{_WORD_EDGE}(?P<second>{_HEDGE})(?![a-z])", re.IGNORECASE
)
_HEDGED_CONFIRMATION = re.compile(
    rf"{_WORD_EDGE}(?:{_HEDGE}){_JOINER}(?P<after>{_CONFIRM})"
    rf"|(?P<before>{_CONFIRM}){_JOINER}{_WORD_EDGE}(?:{_HEDGE})",
    re.IGNORECASE,
)
# the mend reads wider than the check (spaces are not collapsed there): it removes more
_JOINER_WIDE = _JOINER.replace("{0,4}", "{0,12}")
_STACKED_WIDE = re.compile(_STACKED.pattern.replace(_JOINER, _JOINER_WIDE), re.IGNORECASE)
_HEDGED_CONFIRMATION_WIDE = re.compile(
    _HEDGED_CONFIRMATION.pattern.replace(_JOINER, _JOINER_WIDE), re.IGNORECASE
)
_ANY_HEDGE = re.compile(rf"{_WORD_EDGE}(?:{_HEDGE})(?![a-z])", re.IGNORECASE)
_ANY_CONFIRMATION = re.compile(_CONFIRM, re.IGNORECASE)
_MAX_MENDS = 20
# "约为基线的 3.2 倍" / "about 3.2× the baseline"
_RATIO = re.compile(r"约为基线的 ?(\d+(?:\.\d+)?) ?倍|about (\d+(?:\.\d+)?) ?× the baseline")
# "窗口内最大值 0.8（04:03）" / "window maximum 0.8 (04:03)", and the onset after it
_PEAK = re.compile(
    r"(?:窗口内最大值|变化后最大值|window maximum|maximum since the change)"
    r"[^()（）\n]{0,40}[(（](?:at )?(\d{1,2}:\d{2})"
)
_ONSET = re.compile(r"(?:变化始于|changing from) ?(?:\d{4}-\d{2}-\d{2} )?(\d{1,2}:\d{2})")
_PEAK_FIRST = ("早于变化", "before the change")
_STATEMENT_END = re.compile(r"[。\n]|[;；](?=\s)|\.(?=\s|$)")
_SECTION = re.compile(r"^\*\*[^*\n]+\*\*\s*$", re.MULTILINE)


def _excerpt(text: str, start: int, end: int) -> str:
    return text[max(0, start - 20) : end + 20].strip()


def _conclusion(answer: str) -> str:
    """The answer's opening: the text from its first section title to the second one."""
    titles = list(_SECTION.finditer(answer))
    if not titles:
        return answer
    start = titles[0].end()
    end = titles[1].start() if len(titles) > 1 else len(answer)
    return answer[start:end].strip()


def _first_sentence(text: str) -> str:
    found = _STATEMENT_END.search(text)
    return text[: found.start()] if found else text


def _badge_findings(answer: str, certainty: Certainty) -> list[CoherenceFinding]:
    conclusion = text_normalize(_conclusion(answer))
    if certainty == Certainty.CONFIRMED:
        opening = _first_sentence(conclusion)
        hedge = _ANY_HEDGE.search(opening)
        if hedge:
            return [_finding(CoherenceCode.BADGE_CONCLUSION_MISMATCH, opening, *hedge.span())]
        return []
    confirmed = _ANY_CONFIRMATION.search(conclusion)
    if confirmed:
        return [_finding(CoherenceCode.BADGE_CONCLUSION_MISMATCH, conclusion, *confirmed.span())]
    return []


def _finding(code: CoherenceCode, text: str, start: int, end: int) -> CoherenceFinding:
    return CoherenceFinding(code=code, excerpt=_excerpt(text, start, end)[:200])


def _hedge_findings(lines: list[str]) -> list[CoherenceFinding]:
    found = []
    for line in lines:
        found += [
            _finding(CoherenceCode.STACKED_HEDGES, line, *m.span()) for m in _STACKED.finditer(line)
        ]
        found += [
            _finding(CoherenceCode.HEDGED_CONFIRMATION, line, *m.span())
            for m in _HEDGED_CONFIRMATION.finditer(line)
        ]
    return found


def statement_hedges_mend(text: str) -> str:
    """``text`` with one hedge per statement: a hedge right after another is dropped, and
    so is a confirmation next to a hedge (a hedged statement is not confirmed).

    Only removes words, so what the text states stays bound (the Composer guard).
    """
    for _round in range(_MAX_MENDS):
        stacked = _STACKED_WIDE.search(text)
        if stacked:
            text = text[: stacked.start("second")] + text[stacked.end("second") :]
            continue
        hedged = _HEDGED_CONFIRMATION_WIDE.search(text)
        if hedged is None:
            break
        group = "after" if hedged.group("after") else "before"
        text = text[: hedged.start(group)] + text[hedged.end(group) :]
    return text


def _statements(lines: list[str]) -> Iterable[str]:
    """Each statement of the answer: its lines, cut at sentence ends."""
    for line in lines:
        start = 0
        for end in _STATEMENT_END.finditer(line):
            yield line[start : end.start()]
            start = end.end()
        yield line[start:]


def _named(text: str, services: Iterable[str]) -> list[Fact]:
    return [
        f
        for f in facts_extract(text, services=services)
        if f.kind in (FactKind.IDENTIFIER, FactKind.SERVICE)
    ]


_CLAUSE_END = re.compile(r"[，,；;。:：(（]")
_LABELS = re.compile(r"\{([^{}\n]{1,200})\}")


def _series_key(prefix: str, segment: str, services: Iterable[str]) -> frozenset[str]:
    """What a ratio is about: the identifiers, service names and label sets
    (``{statistic=avg}``: a series is its name and its labels) before it in its item.

    ``segment`` is the item's text since the ratio before this one (the whole prefix for the
    first). When the item names one service, the ratio is that service's. When it names
    more (a path, a caller and its callee, a cascade), the ratio is about the service its
    own clause names last (in both answer languages a figure's subject comes right before
    it: "checkout 的 p99 约为…", "checkout p99 … about 3×"), with what follows it; a clause
    that names none (a basis in brackets) is about the item's subject, the first service it
    names, with the identifiers after the last service named. A later ratio of an item is
    about what is named after the ratio before it (its own series), with the item's subject.
    """
    facts = _named(prefix, services)
    named = [f for f in facts if f.kind == FactKind.SERVICE]
    start = len(prefix) - len(segment)  # a later ratio's series is named after the one before
    several = len({f.key for f in named}) > 1
    if several:
        cut = max((m.end() for m in _CLAUSE_END.finditer(segment)), default=0)
        clause = segment[cut:]
        own = _named(clause, services)
        own_named = [f for f in own if f.kind == FactKind.SERVICE]
        if own_named:
            subject = own_named[-1]
            chosen = [f.key for f in own if f.start >= subject.start]
            return frozenset([*chosen, *_label_sets(clause[subject.start :])])
        start = max(start, named[-1].end)
    subject_key = [named[0].key] if named else []
    region = [f.key for f in facts if f.start >= start and f.kind == FactKind.IDENTIFIER]
    if not several:
        region += [f.key for f in facts if f.start >= start and f.kind == FactKind.SERVICE]
    return frozenset([*subject_key, *region, *_label_sets(prefix[start:])])


def _label_sets(text: str) -> list[str]:
    """The label sets a text writes (``{status=504}``), spaces and quotes left out."""
    return ["{" + re.sub(r"[\s\"']", "", m.group(1)) + "}" for m in _LABELS.finditer(text)]


def _same_series(key: frozenset[str], other: frozenset[str], keys: set[frozenset[str]]) -> bool:
    """The same series: one statement names all the other names, and nothing else stated can
    be meant (``p99`` in a basis is checkout's p99 when checkout's is the only p99 stated;
    with cart's p99 stated too, a bare ``p99`` could be either)."""
    if not (key <= other or other <= key):
        return False
    small = key if key <= other else other
    chain = sorted({k for k in keys if small <= k} | {key, other}, key=len)
    return all(a <= b for a, b in itertools.pairwise(chain))


def _line_ratios(line: str, services: Iterable[str]) -> list[tuple[frozenset[str], str, str]]:
    """Each ratio ``line`` states: its series key, its value and the statement giving it."""
    ratios: list[tuple[frozenset[str], str, str]] = []
    # the whole item up to the ratio: a basis "（依据：p99 …）" after its hypothesis's
    # sentence is about the service that sentence names
    previous = 0
    for match in _RATIO.finditer(line):
        prefix = line[: match.start()]
        key = _series_key(prefix, prefix[previous:], services)
        previous = match.end()
        if key:
            value = match.group(1) or match.group(2)
            ratios.append((key, value, line[max(0, match.start() - 120) : match.end()]))
    return ratios


def series_ratios(text: str, services: Iterable[str] = ()) -> list[tuple[frozenset[str], float]]:
    """The ratios to a baseline ``text`` states, each with its series' key (as the
    ``series_two_figures`` rule reads them)."""
    services = list(services)
    return [
        (key, float(value))
        for line in text_normalize(text).splitlines()
        for key, value, _statement in _line_ratios(line, services)
    ]


def series_figures_conflict(
    ratios: list[tuple[frozenset[str], float]], stated: list[tuple[frozenset[str], float]]
) -> bool:
    """Whether one of ``ratios`` gives a series of ``stated`` another value (the
    ``series_two_figures`` rule over the two lists together)."""
    keys = {key for key, _value in [*ratios, *stated]}
    return any(
        value != other_value and _same_series(key, other_key, keys)
        for key, value in ratios
        for other_key, other_value in stated
    )


def _series_findings(lines: list[str], services: Iterable[str]) -> list[CoherenceFinding]:
    """One series, two ratios: two items about the same series give different values."""
    ratios = [r for line in lines for r in _line_ratios(line, services)]
    keys = {key for key, _value, _statement in ratios}
    findings = []
    for i, (key, value, statement) in enumerate(ratios):
        for other_key, other_value, _other in ratios[:i]:
            if float(value) != float(other_value) and _same_series(key, other_key, keys):
                findings.append(
                    CoherenceFinding(code=CoherenceCode.SERIES_TWO_FIGURES, excerpt=statement[:200])
                )
                break
    return findings


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def _onset_findings(lines: list[str]) -> list[CoherenceFinding]:
    findings = []
    for statement in _statements(lines):
        peak, onset = _PEAK.search(statement), _ONSET.search(statement)
        if peak is None or onset is None or any(p in statement for p in _PEAK_FIRST):
            continue
        if _minutes(peak.group(1)) < _minutes(onset.group(1)):
            findings.append(
                CoherenceFinding(code=CoherenceCode.PEAK_BEFORE_ONSET, excerpt=statement[:200])
            )
    return findings


@dataclass(frozen=True)
class StatedKind:
    """A cause's kinds as an answer states them, with the text that is its evidence."""

    entity: str | None
    kind: str | None
    alternative: str | None
    evidence: str


def stated_kinds(
    claims: Iterable[AllowedClaim], hypotheses: Iterable[AllowedHypothesis]
) -> list[StatedKind]:
    """The kinds the cause claims and the hypotheses state, claims first."""
    stated = [
        StatedKind(c.entity, c.root_cause_kind, c.root_cause_kind_alternative, c.text)
        for c in claims
        if c.claim_type in CAUSE_CLAIM_TYPES
    ]
    # a hypothesis's text is often worded from its kind: its basis is what shows the kind
    return stated + [
        StatedKind(
            h.entity,
            h.root_cause_kind,
            h.root_cause_kind_alternative,
            h.basis if h.basis.strip() else h.text,
        )
        for h in hypotheses
    ]


def kinds_unshown(stated: list[StatedKind]) -> list[list[str]]:
    """For each stated cause, the kinds it names that its evidence does not show.

    The second kind is shown too where the answer puts it as a hypothesis of its own about
    the same service (the basis of "…or network" says what would tell the two apart).
    """
    missing_all = []
    for item in stated:
        missing = [item.kind] if item.kind and not kind_shown(item.kind, item.evidence) else []
        if item.alternative and not kind_shown(item.alternative, item.evidence):
            others = [
                o.evidence for o in stated if o.entity == item.entity and o.kind == item.alternative
            ]
            if not any(kind_shown(item.alternative, other) for other in others):
                missing.append(item.alternative)
        missing_all.append(missing)
    return missing_all


def _kind_findings(composer_input: ComposerInput) -> list[CoherenceFinding]:
    """A cause the answer states whose kind (or second kind) its evidence does not show."""
    stated = stated_kinds(composer_input.allowed_claims, composer_input.allowed_hypotheses)
    return [
        CoherenceFinding(
            code=CoherenceCode.KIND_WITHOUT_EVIDENCE, excerpt=f"{shown}: {item.evidence}"[:200]
        )
        for item, missing in zip(stated, kinds_unshown(stated), strict=True)
        for shown in missing
    ]


def answer_coherence_check(
    *, answer: str, composer_input: ComposerInput, services: Iterable[str] = ()
) -> list[CoherenceFinding]:
    """Every contradiction of ``answer`` with itself and with its one certainty (none: []).

    ``services`` are the environment's service names (they tell one series from another).
    """
    lines = [text_normalize(line) for line in answer.splitlines() if line.strip()]
    return [
        *_badge_findings(answer, composer_input.certainty()),
        *_hedge_findings(lines),
        *_series_findings(lines, list(services)),
        *_onset_findings(lines),
        *_kind_findings(composer_input),
    ]
