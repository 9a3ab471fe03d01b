"""Facts in text: one normaliser and one extractor, shared by the Gatekeeper and the Composer guard.

A *fact* is something concrete a statement names, which its evidence must
also hold: a number, a clock time, a date, an identifier, or one of the
environment's service names (docs/contracts.md §2, "its facts are bound").

API
---

``text_normalize(text) -> str``
    The one normalisation every comparison uses: Unicode NFKC, case-folding,
    all quotes to ``"``, all dashes to ``-``, whitespace collapsed to one
    space, and no space next to a CJK character ("服务 payment 超时" equals
    "服务payment超时").

``text_normalize_mapped(text, *, fold=True) -> (normalised, starts, ends)``
    The same, with each output character's span in ``text`` (a Python loop per
    character: for highlighting and for short texts such as claims).
    ``fold=False`` keeps letter case (the extractor needs it for CamelCase).

``facts_extract(text, *, services=()) -> list[Fact]``
    The facts a statement names, in order, each with its kind, its ``key``
    (what is compared) and its span in the original ``text``:

    - ``date``: ``2026-03-02`` (also ``/`` or ``.`` between the parts), with
      the month's name (``04 May 2026``, ``04/May/2026``, ``May 4, 2026``) or
      in Chinese (``2026年5月4日``); a timestamp ``2026-03-02T10:21:03Z`` gives
      a date and a time;
    - ``time``: ``10:21`` or ``10:21:03`` (hours 0-23, minutes 0-59);
    - ``number``: a run of digits with ``.`` or ``,`` between digits, compared
      whole and by value (``12,000`` = ``12000``, ``50.50`` = ``50.5``, but
      ``50.5`` ≠ ``50``); a unit glued to it (``30000ms``, ``2.5GiB``) is not
      part of the number; a ``%`` after it (``35%``) must be after it in the
      evidence too;
    - ``identifier``: a token of ASCII letters and digits that joins parts with
      ``-``, ``_``, ``.`` or ``/`` or mixes letters and digits
      (``payment-service``, ``HikariPool-1``, ``jfusterm/stress``,
      ``ORA-00060``, ``v2.13.9``, ``p99``), or is written in CamelCase
      (``OOMKilled``, ``CrashLoopBackOff``); dotted abbreviations such as
      ``e.g.`` are not identifiers;
    - ``service``: one of ``services`` (the environment's service names),
      whatever its form.

    Numbers inside an identifier, a date or a time are part of that fact, not
    facts of their own. Plain words, Chinese numerals and relative times
    ("五分钟前") are not extracted.

``FactSource``
    Where facts may be found: regions of already normalised text
    (``region_add(text, start, end)``; the boundaries of a region are checked
    against the text around it, so a region cut from a longer output cannot
    bind ``pool-1`` inside ``hikaripool-1``). ``contains(fact)``:

    - a number is found when a number of the same value occurs there, as the
      extractor reads numbers (digits inside an identifier such as ``x280``
      or ``HikariPool-1`` are not a number), followed by ``%`` when the fact
      has one; an event count as kubectl writes it (``(x42 over 12m)``,
      ``x42``) holds the number 42, whole (not 4, 142 or 4.2);
    - a time ``10:21`` is found in any time or timestamp holding that minute
      (``2026-03-02T10:21:03Z``); ``10:21:03`` needs the same second;
    - a date is found in a date with the same year, month and day;
    - a region that ends inside a timestamp holds the parts it contains
      (``2026-05-04 09:12`` cut from ``2026-05-04 09:12:41.207``);
    - an identifier or service name is found as a whole token: not preceded
      or followed by a letter or digit, nor continued by ``-``/``.`` and a
      letter or digit (``payment-service`` is not in ``payment-service-db``);
      ``_`` and ``/`` are boundaries, so ``mysql`` is in
      ``mysql_global_status`` and ``jfusterm/stress`` in
      ``docker.io/jfusterm/stress``.

``span_is_whole(text, start, end) -> bool``
    Whether ``text[start:end]`` neither begins nor ends inside a number
    (``reached 50.`` is not whole inside ``reached 50.5``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import StrEnum

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


def text_normalize(text: str) -> str:
    """NFKC, casefold, quotes/dashes unified, whitespace collapsed, no spaces next to CJK."""
    return _normalized(text, fold=True)


def text_normalize_cased(text: str, folded: str | None = None) -> str:
    """``text_normalize`` with letter case kept, at the same positions: ``text_normalize(text)``
    (``folded``, when the caller has it) and this differ only in the case of their letters, so
    a span found in one is the same span in the other. Where folding changed a length (``ß``
    → ``ss``: folding only ever lengthens), ``text_normalize(text)`` itself: the positions
    matter more than the capitals."""
    if folded is None:
        folded = text_normalize(text)
    cased = _normalized(text, fold=False)
    return cased if len(cased) == len(folded) else folded


def _normalized(text: str, *, fold: bool) -> str:
    """``text_normalize``, its case folding only where ``fold``."""
    if not text:
        return ""
    if text.isascii():
        out = text.lower() if fold else text
        if "'" in out or "`" in out:
            out = out.replace("'", '"').replace("`", '"')
        return " ".join(out.split())
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    out = text.casefold() if fold else text
    for ch in _NON_ASCII_PUNCT:
        if ch in out:
            out = out.replace(ch, _PUNCT[ch])
    if "'" in out or "`" in out:
        out = out.replace("'", '"').replace("`", '"')
    out = " ".join(out.split())
    if out.isascii():
        return out
    return _SPACE_NEXT_TO_CJK.sub("", out)


def text_normalize_mapped(text: str, *, fold: bool = True) -> tuple[str, list[int], list[int]]:
    """``text_normalize`` with, for each output character, its span in ``text``.

    Slow (a Python loop per character): for highlighting one output and for
    short texts. NFKC is applied per base character and its combining marks,
    which equals whole-text NFKC except for rare compositions across starters.
    With ``fold=False`` letter case is kept (otherwise identical).
    """
    if text.isascii():
        return _ascii_normalize_mapped(text, fold=fold)
    return _general_normalize_mapped(text, fold=fold)


@functools.lru_cache(maxsize=4096)
def _piece_normalize(piece: str, fold: bool) -> str:
    """One base character and its combining marks, normalised (cached: texts repeat them)."""
    piece = unicodedata.normalize("NFKC", piece)
    if fold:
        piece = piece.casefold()
    return "".join(_PUNCT.get(ch, ch) for ch in piece)


_ASCII_RUN = re.compile(r"[\x00-\x7f]+")
_SPACE_RUN = re.compile(r"\s+")


def _general_normalize_mapped(text: str, *, fold: bool) -> tuple[str, list[int], list[int]]:
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    n = len(text)
    i = 0
    for run in _ASCII_RUN.finditer(text):
        a, b = run.span()
        if b < n and text[b] >= "\u0300" and unicodedata.combining(text[b]):
            b -= 1  # the run's last character carries combining marks: the slow way
        _pieces_add(text, i, a, fold, chars, starts, ends)
        if b > a:
            piece = text[a:b].lower() if fold else text[a:b]
            chars.append(piece.replace("'", '"').replace("`", '"'))
            starts.extend(range(a, b))
            ends.extend(range(a + 1, b + 1))
        i = b
    _pieces_add(text, i, n, fold, chars, starts, ends)
    # collapse whitespace runs to one space (mapped to the run's first character), strip
    # both ends, and drop a space next to a CJK character
    joined = "".join(chars)
    out: list[str] = []
    s_out: list[int] = []
    e_out: list[int] = []
    cursor = 0
    for space in _SPACE_RUN.finditer(joined):
        a, b = space.span()
        out.append(joined[cursor:a])
        s_out.extend(starts[cursor:a])
        e_out.extend(ends[cursor:a])
        if 0 < a and b < len(joined):
            if not (_CJK_CHAR.match(joined[a - 1]) or _CJK_CHAR.match(joined[b])):
                out.append(" ")
                s_out.append(starts[a])
                e_out.append(ends[a])
        cursor = b
    out.append(joined[cursor:])
    s_out.extend(starts[cursor:])
    e_out.extend(ends[cursor:])
    return "".join(out), s_out, e_out


def _pieces_add(
    text: str,
    i: int,
    stop: int,
    fold: bool,
    chars: list[str],
    starts: list[int],
    ends: list[int],
) -> None:
    """Normalise ``text[i:stop]`` one base character (with its combining marks) at a time."""
    n = len(text)
    while i < stop:
        j = i + 1
        while j < n and text[j] >= "\u0300" and unicodedata.combining(text[j]):
            j += 1
        piece = _piece_normalize(text[i:j], fold)
        chars.append(piece)
        starts.extend([i] * len(piece))
        ends.extend([j] * len(piece))
        i = j


_NON_SPACE = re.compile(r"\S+")


def _ascii_normalize_mapped(text: str, *, fold: bool) -> tuple[str, list[int], list[int]]:
    """``text_normalize_mapped`` of ASCII text: one character each, whitespace runs collapsed."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    previous_end = -1
    for match in _NON_SPACE.finditer(text):
        a, b = match.span()
        if previous_end >= 0:
            out.append(" ")  # the collapsed run maps to its first character, like the slow path
            starts.append(previous_end)
            ends.append(previous_end + 1)
        piece = match.group(0)
        if fold:
            piece = piece.lower()
        out.append(piece.replace("'", '"').replace("`", '"'))
        starts.extend(range(a, b))
        ends.extend(range(a + 1, b + 1))
        previous_end = b
    return "".join(out), starts, ends


# --- whole numbers ---------------------------------------------------------------


def _number_char(text: str, i: int) -> bool:
    """Whether ``text[i]`` belongs to a number: a digit, or ``.``/``,`` between digits."""
    ch = text[i]
    if ch.isdigit():
        return True
    return ch in ".," and 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()


def span_is_whole(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` neither begins nor ends inside a number."""
    if 0 < start < len(text) and _number_char(text, start - 1) and _number_char(text, start):
        return False
    return not (0 < end < len(text) and _number_char(text, end - 1) and _number_char(text, end))


# --- facts -----------------------------------------------------------------------


class FactKind(StrEnum):
    NUMBER = "number"
    TIME = "time"
    DATE = "date"
    IDENTIFIER = "identifier"
    SERVICE = "service"


@dataclass(frozen=True)
class Fact:
    """One fact of a text. ``key`` is compared; ``text`` is how the statement wrote it."""

    kind: FactKind
    key: str
    text: str
    start: int = 0  # span in the original text
    end: int = 0
    percent: bool = False


_HOUR = r"(?:[01]?\d|2[0-3])"
_MINUTE = r"[0-5]\d"
_TIME_PART = rf"(?P<{{p}}h>{_HOUR}):(?P<{{p}}m>{_MINUTE})(?::(?P<{{p}}s>{_MINUTE}|60))?(?:\.\d+)?"
_DATE_RE = (
    r"(?P<y>\d{4})(?P<sep>[-/.])(?P<mo>\d{1,2})(?P=sep)(?P<d>\d{1,2})"
    rf"(?:[t ]{_TIME_PART.format(p='d')}(?:z|[+-]\d{{2}}:?\d{{2}})?)?"
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH = rf"(?:{'|'.join(_MONTHS)})[a-z]{{0,6}}\.?"
# a date written with the month's name, as HTTP, kubectl describe, nginx and syslog write it:
# "Mon, 04 May 2026 09:12:41 +0000", "04/May/2026:09:12:41", "May 4, 2026 09:12:41"
_NAMED_DATE_RE = (
    rf"(?:(?P<nd1>\d{{1,2}})[ /-](?P<nm1>{_MONTH})[ /-](?P<ny1>\d{{4}})"
    rf"|(?P<nm2>{_MONTH}) (?P<nd2>\d{{1,2}}),? (?P<ny2>\d{{4}}))"
    rf"(?:[: ]{_TIME_PART.format(p='n')})?"
)
_CHINESE_DATE_RE = r"(?P<ny3>\d{4})年(?P<nm3>\d{1,2})月(?P<nd3>\d{1,2})[日号]"  # 2026年5月4日
# an event count as kubectl and the kubelet write it: "(x42 over 12m)", "x42"
_EVENT_COUNT = re.compile(r"x(\d+)", re.ASCII | re.IGNORECASE)
# Dates, then times, then tokens; each alternative starts where no letter or digit precedes.
_FACT = re.compile(
    rf"(?<![a-z0-9_])(?:(?P<date>{_DATE_RE})(?![0-9]|:[0-9])"
    rf"|(?P<named>{_NAMED_DATE_RE})(?![0-9]|:[0-9])|(?P<named3>{_CHINESE_DATE_RE})"
    rf"|(?<![0-9][.,:])(?P<time>{_TIME_PART.format(p='t')})(?![0-9]|:[0-9])"
    r"|(?P<token>[a-z0-9]+(?:[-_./][a-z0-9]+|(?<=[0-9]),[0-9]+)*))",
    re.ASCII | re.IGNORECASE,
)
_NUMBER_TOKEN = re.compile(r"(\d+(?:[.,]\d+)*)([a-z]{0,5})", re.ASCII | re.IGNORECASE)
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_LETTER = re.compile(r"[a-z]", re.ASCII | re.IGNORECASE)
_DIGIT = re.compile(r"[0-9]")
_SEPARATOR = re.compile(r"[-_./]")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_PERCENT_AFTER = re.compile(r" ?%")


def _number_key(number: str) -> str:
    """The value of a number as written: thousands separators dropped, trailing zeros too."""
    if _THOUSANDS.fullmatch(number):
        number = number.replace(",", "")
    if _DECIMAL.fullmatch(number):
        try:
            return format(Decimal(number).normalize(), "f")
        except InvalidOperation:  # pragma: no cover - the pattern admits only decimals
            return number
    return number


def _time_key(match: re.Match[str], prefix: str) -> tuple[str, str | None]:
    minute = f"{int(match.group(prefix + 'h')):02d}:{match.group(prefix + 'm')}"
    second = match.group(prefix + "s")
    return minute, (f"{minute}:{second}" if second else None)


def _date_key(match: re.Match[str]) -> str | None:
    month, day = int(match.group("mo")), int(match.group("d"))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{match.group('y')}-{month:02d}-{day:02d}"


def _named_date_key(match: re.Match[str]) -> tuple[str | None, int, int]:
    """The key of a date written with its month's name, and the span of the date part."""
    n = "1" if match.group("nm1") else "2" if match.group("nm2") else "3"
    written = match.group("nm" + n)
    month = int(written) if written.isdigit() else _MONTHS.index(written[:3].lower()) + 1
    day, year = int(match.group("nd" + n)), match.group("ny" + n)
    span = (
        [match.start(g + n) for g in ("nd", "nm", "ny")],
        [match.end(g + n) for g in ("nd", "nm", "ny")],
    )
    key = f"{year}-{month:02d}-{day:02d}" if 1 <= day <= 31 and 1 <= month <= 12 else None
    return key, min(span[0]), max(span[1]) + (1 if n == "3" else 0)


def _timestamp_facts(match: re.Match[str], end: int) -> list[tuple]:
    """The date and the time of a date or timestamp match, each kept when it ends by ``end``.

    An excerpt may end inside a timestamp (``2026-05-04 09:12`` quoted from
    ``2026-05-04 09:12:41.207``): the parts it holds are still stated there.
    """
    raw: list[tuple] = []
    if match.group("date"):
        key, s, e, p = _date_key(match), match.start("y"), match.end("d"), "d"
    else:
        (key, s, e), p = _named_date_key(match), "n"
    if key is None:
        return raw
    if e <= end:
        raw.append((FactKind.DATE, key, s, e, False))
    if p == "n" and not match.group("named"):
        return raw
    if match.group(p + "h"):
        minute, second = _time_key(match, p)
        ts = match.start(p + "h")
        if match.group(p + "s") and match.end(p + "s") <= end:
            raw.append((FactKind.TIME, second, ts, match.end(p + "s"), False))
        elif match.end(p + "m") <= end:
            raw.append((FactKind.TIME, minute, ts, match.end(p + "m"), False))
    return raw


def _is_camel(token: str) -> bool:
    return (
        token.isalpha() and any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)
    )


def _is_abbreviation(token: str) -> bool:
    parts = token.split(".")
    return len(parts) > 1 and all(p.isalpha() and len(p) <= 2 for p in parts)


def _service_keys(services: Iterable[str]) -> set[str]:
    keys = set()
    for name in services or ():
        if isinstance(name, str):
            key = text_normalize(name).strip()
            if key:
                keys.add(key)
    return keys


def _token_facts(token: str, start: int, services: set[str], after: str) -> list[tuple]:
    """``(kind, key, start, end, percent)`` for one token of the case-kept normalised text."""
    lowered = token.lower()
    if lowered in services:
        return [(FactKind.SERVICE, lowered, start, start + len(token), False)]
    number = _NUMBER_TOKEN.fullmatch(token)
    if number:
        digits = number.group(1)
        sign = None if number.group(2) else _PERCENT_AFTER.match(after)
        end = start + len(digits) + (len(sign.group(0)) if sign else 0)
        return [(FactKind.NUMBER, _number_key(digits), start, end, sign is not None)]
    if not _LETTER.search(token):  # digits joined by - or / : a range or a ratio
        found = []
        offset = 0
        for part in _SEPARATOR.split(token):
            if part and _NUMBER_TOKEN.fullmatch(part):
                s = start + token.index(part, offset)
                found.append((FactKind.NUMBER, _number_key(part), s, s + len(part), False))
            offset += len(part) + 1
        return found
    has_digit = _DIGIT.search(token) is not None
    if (has_digit or _SEPARATOR.search(token)) and not _is_abbreviation(lowered):
        return [(FactKind.IDENTIFIER, lowered, start, start + len(token), False)]
    if _is_camel(token):
        return [(FactKind.IDENTIFIER, lowered, start, start + len(token), False)]
    return []


# Words as prose writes them (lower case, capitalised or all capitals), joined by hyphens.
_WORD = r"(?:[A-Za-z][a-z]*|[A-Z]+)"
_COMPOUND = re.compile(rf"{_WORD}(?:-{_WORD})+")


def fact_is_compound(fact: Fact) -> bool:
    """Whether ``fact`` is an identifier written as words joined by hyphens alone
    (``round-trip``, ``knock-on``, ``TCP-level``, ``payment-service``): the form English
    compounds and service names share, unlike a token with a digit, ``_``, ``.``, ``/`` or a
    CamelCase word (``HikariPool-Main``), which prose never writes."""
    return fact.kind == FactKind.IDENTIFIER and _COMPOUND.fullmatch(fact.text) is not None


def _alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _token_in(text: str, key: str, start: int, end: int) -> bool:
    """Whether ``key`` occurs in ``text[start:end]`` as a whole token (see ``FactSource``)."""
    n = len(text)
    pos = text.find(key, start, end)
    while pos != -1:
        stop = pos + len(key)
        before = text[pos - 1] if pos > 0 else ""
        before2 = text[pos - 2] if pos > 1 else ""
        after = text[stop] if stop < n else ""
        after2 = text[stop + 1] if stop + 1 < n else ""
        if not (
            _alnum(before)
            or (before in "-." and before and _alnum(before2))
            or _alnum(after)
            or (after in "-." and after and _alnum(after2))
        ):
            return True
        pos = text.find(key, pos + 1, end)
    return False


def _boundary_pattern(key: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?<![a-z0-9])(?<![a-z0-9][-.]){re.escape(key)}(?![a-z0-9]|[-.][a-z0-9])",
        re.ASCII,
    )


def _scan(
    normalized: str,
    services: set[str],
    start: int = 0,
    end: int | None = None,
    *,
    numbers_only: bool = False,
) -> list:
    """Raw facts ``(kind, key, start, end, percent)`` of ``normalized[start:end]``.

    ``numbers_only`` skips identifier tokens (evidence needs only its numbers, times
    and dates as sets; identifiers are searched for in its text).
    """
    end = len(normalized) if end is None else end
    raw: list[tuple] = []
    for match in _FACT.finditer(normalized, start, min(len(normalized), end + 40)):
        if match.start() >= end:
            break
        if match.group("date") or match.group("named") or match.group("named3"):
            raw.extend(_timestamp_facts(match, end))
            continue
        if match.end() > end:
            break
        if match.group("time"):
            minute, second = _time_key(match, "t")
            e = match.end("ts") if match.group("ts") else match.end("tm")
            raw.append((FactKind.TIME, second or minute, match.start("th"), e, False))
        else:
            after = normalized[match.end() : match.end() + 2]
            token = match.group("token")
            if numbers_only and not token[0].isdigit():
                count = _EVENT_COUNT.fullmatch(token)
                if count:
                    s = match.start() + 1
                    raw.append(
                        (FactKind.NUMBER, _number_key(count.group(1)), s, match.end(), False)
                    )
                continue
            raw.extend(_token_facts(token, match.start(), services, after))
    return raw


def facts_extract(text: str, *, services: Iterable[str] = ()) -> list[Fact]:
    """The facts ``text`` names, in order of appearance, with spans in ``text``."""
    if not text:
        return []
    normalized, starts, ends = text_normalize_mapped(text, fold=False)
    service_keys = _service_keys(services)
    raw = _scan(normalized, service_keys)
    # a service name that is not one token ("order service", or with non-ASCII characters)
    lowered = normalized.translate(_ASCII_LOWER)  # same length, unlike str.lower()
    covered = [(r[2], r[3]) for r in raw]
    for key in service_keys:
        if _FACT.fullmatch(key) and key.isascii():
            continue
        for found in _boundary_pattern(key).finditer(lowered):
            span = (found.start(), found.end())
            if not any(s < span[1] and span[0] < e for s, e in covered):
                raw.append((FactKind.SERVICE, key, span[0], span[1], False))
    raw.sort(key=lambda r: r[2])
    facts = []
    for kind, key, s, e, percent in raw:
        start, end = starts[s], ends[e - 1]
        facts.append(Fact(kind, key, text[start:end], start, end, percent))
    return facts


# --- where facts are found -----------------------------------------------------------


@dataclass
class FactSource:
    """Regions of normalised text in which a statement's facts may be found."""

    regions: list[tuple[str, int, int]] = field(default_factory=list)
    _numbers: set[str] = field(default_factory=set)
    _percents: set[str] = field(default_factory=set)
    _minutes: set[str] = field(default_factory=set)
    _seconds: set[str] = field(default_factory=set)
    _dates: set[str] = field(default_factory=set)

    def region_add(self, text: str, start: int = 0, end: int | None = None) -> None:
        """Add ``text[start:end]`` (``text`` already normalised with ``text_normalize``)."""
        end = len(text) if end is None else min(end, len(text))
        if not text or start >= end:
            return
        self.regions.append((text, start, end))
        for kind, key, *_span, percent in _scan(text, set(), start, end, numbers_only=True):
            if kind == FactKind.NUMBER:
                self._numbers.add(key)
                if percent:
                    self._percents.add(key)
            elif kind == FactKind.DATE:
                self._dates.add(key)
            elif kind == FactKind.TIME:
                self._minutes.add(key[:5])
                if len(key) > 5:
                    self._seconds.add(key)

    def contains(self, fact: Fact) -> bool:
        if fact.kind == FactKind.NUMBER:
            return fact.key in (self._percents if fact.percent else self._numbers)
        if fact.kind == FactKind.TIME:
            return fact.key in (self._seconds if fact.key.count(":") == 2 else self._minutes)
        if fact.kind == FactKind.DATE:
            return fact.key in self._dates
        for text, start, end in self.regions:
            if _token_in(text, fact.key, start, end):
                return True
        return False


def fact_source_of(texts: Iterable[str]) -> FactSource:
    """A source made of whole texts (each normalised here)."""
    source = FactSource()
    for text in texts:
        if text:
            source.region_add(text_normalize(text))
    return source
