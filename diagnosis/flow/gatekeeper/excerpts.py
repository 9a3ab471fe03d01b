"""Excerpt matching (docs/contracts.md §2, "A binding"): does an excerpt occur in a tool output?

An excerpt is at most ``MAX_FRAGMENTS`` fragments joined by ``...`` or ``…``,
found in order, each at least ``MIN_EXCERPT_CHARS`` characters, with at most
``MAX_FRAGMENT_GAP`` characters of the normalised output between one
fragment's end and the next one's start. A match may neither begin nor end
inside a number (``diagnosis.facts.span_is_whole``).

"Characters" of the minimum are letters, digits and CJK characters after
normalisation: punctuation, symbols and spaces occur in every output
(``service=``, ``", "``, ``=== |``) and show nothing, so they do not count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from diagnosis.contracts import FindingCode
from diagnosis.facts import span_is_whole, text_normalize, text_normalize_mapped
from diagnosis.flow.parsing import detail_clip

MIN_EXCERPT_CHARS = 8
MAX_FRAGMENTS = 4
MAX_FRAGMENT_GAP = 200

_MAX_CANDIDATES_PER_FRAGMENT = 200_000
_ELLIPSIS = re.compile(r"\.{3,}|…+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# any whole number; atomic and anchored at a run's start so long digit runs cannot backtrack
_ANY_NUMBER = r"(?<!\d)(?<!\d[.,])(?>\d+(?:[.,]\d+)*)(?![.,]?\d)"
_NON_DIGIT = re.compile(r"\D")


@dataclass(frozen=True)
class MatchResult:
    """Whether an excerpt occurs in a normalised output, and where.

    ``code`` is ``None`` when it matched, else a finding code
    (``excerpt_too_short``, ``fragment_too_short``, ``too_many_fragments``,
    ``excerpt_not_found``, ``number_mismatch``, ``fragments_too_far_apart``).
    ``spans`` are the fragments' positions in the *normalised* text; ``detail_code``
    and ``params`` say what ``detail`` says (``diagnosis.wording.FINDING_DETAILS`` words it).
    """

    matched: bool
    code: str | None = None
    detail: str = ""
    spans: tuple[tuple[int, int], ...] = ()
    detail_code: str | None = None
    params: dict[str, str | int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.matched


def excerpt_fragments(normalized_excerpt: str) -> list[str]:
    """The fragments of an already normalised excerpt."""
    return [f.strip() for f in _ELLIPSIS.split(normalized_excerpt) if f.strip()]


def content_length(fragment: str) -> int:
    """Letters, digits and CJK characters: what counts towards the minimum."""
    return sum(1 for ch in fragment if ch.isalnum())


def _numeric_edge(fragment: str) -> bool:
    return (
        fragment[0].isdigit()
        or fragment[0] in ".,"
        or fragment[-1].isdigit()
        or (fragment[-1] in ".,")
    )


def _occurrences(text: str, fragment: str, start: int, stop: int) -> Iterator[int]:
    """Positions of ``fragment`` in ``text[start:stop]`` where it is whole (not inside a number)."""
    check = _numeric_edge(fragment)
    pos = text.find(fragment, start, stop)
    tries = 0
    while pos != -1 and tries < _MAX_CANDIDATES_PER_FRAGMENT:
        tries += 1
        if not check or span_is_whole(text, pos, pos + len(fragment)):
            yield pos
            pos = text.find(fragment, pos + 1, stop)
        elif fragment[0].isdigit() and pos > 0 and text[pos - 1].isdigit():
            # no match can start inside this run of digits: jump past it
            nxt = _NON_DIGIT.search(text, pos)
            if nxt is None:
                return
            pos = text.find(fragment, nxt.start(), stop)
        else:
            pos = text.find(fragment, pos + 1, stop)


def _first(text: str, fragment: str, start: int) -> int:
    return next(_occurrences(text, fragment, start, len(text)), -1)


def _in_order(text: str, fragments: list[str]) -> list[tuple[int, int]]:
    """Spans of the fragments found in order, however far apart (stops at a missing one)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for fragment in fragments:
        pos = _first(text, fragment, cursor)
        if pos == -1:
            return spans
        spans.append((pos, pos + len(fragment)))
        cursor = pos + len(fragment)
    return spans


def _close_after(text: str, fragments: list[str], k: int, spans: list[tuple[int, int]]) -> bool:
    """Extend ``spans`` with fragments ``k``…, each starting within the gap after the last."""
    if k == len(fragments):
        return True
    previous_end = spans[-1][1]
    stop = min(len(text), previous_end + MAX_FRAGMENT_GAP + len(fragments[k]))
    for pos in _occurrences(text, fragments[k], previous_end, stop):
        spans.append((pos, pos + len(fragments[k])))
        if _close_after(text, fragments, k + 1, spans):
            return True
        spans.pop()
    return False


def _close(text: str, fragments: list[str]) -> list[tuple[int, int]] | None:
    for pos in _occurrences(text, fragments[0], 0, len(text)):
        spans = [(pos, pos + len(fragments[0]))]
        if _close_after(text, fragments, 1, spans):
            return spans
    return None


def _numbers_ignored(fragment: str) -> re.Pattern[str]:
    """The fragment as a pattern in which every number matches any whole number."""
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
    fragments = excerpt_fragments(text_normalize(excerpt or ""))
    if len(fragments) > MAX_FRAGMENTS:
        return MatchResult(
            False,
            FindingCode.TOO_MANY_FRAGMENTS.value,
            f"excerpt has {len(fragments)} fragments; at most {MAX_FRAGMENTS} are allowed",
            detail_code="too_many_fragments",
            params={"fragments": len(fragments), "max": MAX_FRAGMENTS},
        )
    lengths = [content_length(f) for f in fragments]
    if len(fragments) <= 1 and sum(lengths) < MIN_EXCERPT_CHARS:
        return MatchResult(
            False,
            FindingCode.EXCERPT_TOO_SHORT.value,
            f"excerpt has {sum(lengths)} letters or digits after normalisation; at least "
            f"{MIN_EXCERPT_CHARS} are needed",
            detail_code="excerpt_too_short",
            params={"length": sum(lengths), "min": MIN_EXCERPT_CHARS},
        )
    short = [k for k, n in enumerate(lengths) if n < MIN_EXCERPT_CHARS]
    if short:
        k = short[0]
        return MatchResult(
            False,
            FindingCode.FRAGMENT_TOO_SHORT.value,
            detail_clip(
                f"fragment {k + 1} of {len(fragments)} ({fragments[k]!r}) has {lengths[k]} "
                f"letters or digits; each fragment needs at least {MIN_EXCERPT_CHARS}"
            ),
            detail_code="fragment_too_short",
            params={
                "position": k + 1,
                "fragments": len(fragments),
                "text": detail_clip(fragments[k], 120),
                "length": lengths[k],
                "min": MIN_EXCERPT_CHARS,
            },
        )
    spans = _in_order(text, fragments)
    if len(spans) < len(fragments):
        missing = fragments[len(spans)]
        if any(ch.isdigit() for f in fragments for ch in f) and _found_ignoring_numbers(
            text, fragments
        ):
            return MatchResult(
                False,
                FindingCode.NUMBER_MISMATCH.value,
                detail_clip(f"the text around {missing!r} is there, but with different numbers"),
                detail_code="number_mismatch",
                params={"text": detail_clip(missing, 120)},
            )
        where = (
            f"fragment {len(spans) + 1} of {len(fragments)}" if len(fragments) > 1 else "excerpt"
        )
        params: dict[str, str | int] = {"text": detail_clip(missing, 120)}
        if len(fragments) > 1:
            params.update(position=len(spans) + 1, fragments=len(fragments))
        return MatchResult(
            False,
            FindingCode.EXCERPT_NOT_FOUND.value,
            detail_clip(f"{where} not found in the output: {missing!r}"),
            detail_code="fragment_not_found" if len(fragments) > 1 else "excerpt_not_found",
            params=params,
        )
    if len(fragments) > 1:
        close = _close(text, fragments)
        if close is None:
            return MatchResult(
                False,
                FindingCode.FRAGMENTS_TOO_FAR_APART.value,
                f"the fragments occur in order but never within {MAX_FRAGMENT_GAP} characters "
                "of each other (one record, not a collage of the output)",
                detail_code="fragments_too_far_apart",
                params={"gap": MAX_FRAGMENT_GAP},
            )
        spans = close
    return MatchResult(True, None, "", tuple(spans))


def excerpt_matches(excerpt: str, normalized_output: str) -> MatchResult:
    """Check an excerpt (raw, as the model wrote it) against an already normalised output."""
    try:
        return _match(excerpt, normalized_output or "")
    except Exception as exc:
        return MatchResult(False, FindingCode.INTERNAL_ERROR.value, type(exc).__name__)


def excerpt_locate(excerpt: str, text: str) -> list[tuple[int, int]]:
    """Character spans in the original ``text`` where the excerpt's fragments matched.

    For highlighting evidence in context; ``[]`` when the excerpt does not
    match. About 1 s per MB of text when it matches (tool outputs are bounded
    to 16k characters by default).
    """
    try:
        if not _match(excerpt, text_normalize(text or "")).matched:
            return []  # the fast check first: the mapped pass is a Python loop per character
        normalized, starts, ends = text_normalize_mapped(text or "")
        result = _match(excerpt, normalized)
        if not result.matched:
            return []
        return [(starts[s], ends[e - 1]) for s, e in result.spans]
    except Exception:
        return []
