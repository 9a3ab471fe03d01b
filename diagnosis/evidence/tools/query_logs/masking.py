"""Message masking: variable parts of a log message (ids, numbers, addresses) become
placeholders, so that lines differing only there cluster into one template."""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any

SHAPE_CACHE_SIZE = 20_000


_MaskGuard = Callable[[str], bool] | None
# (pattern, placeholder, cheap guard that must hold for the pattern to possibly match)
_MASKS: tuple[tuple[re.Pattern[str], str, _MaskGuard], ...] = (
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<UUID>",
        lambda m: m.count("-") >= 4,
    ),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>", lambda m: "." in m),
    (
        re.compile(
            r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{12,}\b"
        ),
        "<HEX>",
        None,
    ),
    # Ids such as O26030277937 or pod-h466w: a word with a run of three or more digits.
    (re.compile(r"\b[A-Za-z](?=[\w-]*\d{3})[\w-]*"), "<ID>", None),
    (re.compile(r"(?<![A-Za-z0-9])[-+]?\d+(?:[.,]\d+)*"), "<NUM>", None),
)
_DIGIT = re.compile(r"\d")


def message_mask(message: str) -> str:
    """Replace ids, addresses and numbers so lines differing only in them share a template."""
    if not _DIGIT.search(message):
        return message
    for pattern, placeholder, guard in _MASKS:
        if guard is None or guard(message):
            message = pattern.sub(placeholder, message)
    return message


_Piece = str | tuple[int, int]


def _mask_pieces(text: str) -> list[_Piece]:
    """``message_mask(text)`` as placeholders and the (start, end) slices of text that remain.

    Each pattern can be run on the remaining slices one by one: no pattern matches a
    placeholder's characters, and ``<``/``>`` look like the string's edges to ``\\b`` and to
    the lookarounds.
    """
    pieces: list[_Piece] = [(0, len(text))]
    if not _DIGIT.search(text):
        return pieces
    for pattern, placeholder, _guard in _MASKS:
        masked: list[_Piece] = []
        for piece in pieces:
            if isinstance(piece, str):
                masked.append(piece)
                continue
            start, end = piece
            pos = start
            for match in pattern.finditer(text[start:end]):
                if start + match.start() > pos:
                    masked.append((pos, start + match.start()))
                masked.append(placeholder)
                pos = start + match.end()
            if pos < end:
                masked.append((pos, end))
        pieces = masked
    return pieces


_ONE_DIGIT = bytes.maketrans(b"0123456789", b"1111111111")
# The masked text, or a %-template, what fills it from the message, and the UTF-8 byte
# offsets of the message's characters it takes (None when it masks the message itself).
_Recipe = str | tuple[str, Callable[[str], Any], tuple[int, ...] | None]


class MessageMasker:
    """``message_mask`` with a cache keyed by the message's shape.

    Every pattern treats the ASCII digits alike except through the literal ``0x``: each
    is a ``\\d`` and a ``\\w`` and in every class that holds one of them, and no other
    character changes with them. So two messages without ``0x`` that differ only in
    their ASCII digits are masked at the same places, whatever else they hold (CJK text,
    other scripts' digits, which stay as they are in the shape). The shape (the UTF-8
    text, each ASCII digit written as ``1``; an ASCII digit byte never occurs inside a
    multi-byte character) keys a recipe: the masked text itself when no digit survives
    masking, else a %-template taking the surviving digits from the message. Lines that
    differ only in ids and numbers then cost a translate and a dict lookup instead of
    five regular-expression passes.
    """

    def __init__(self) -> None:
        self.recipes: dict[bytes, _Recipe | None] = {}

    def mask(self, message: str) -> str:
        if "0x" in message:
            return message_mask(message)
        # A lone surrogate (from a JSON escape) encodes to bytes that are not UTF-8, for
        # which ``recipe`` has none: such messages are masked one by one.
        shape = message.encode("utf-8", "surrogatepass").translate(_ONE_DIGIT)
        recipe = self.recipe(shape)
        if recipe is None:
            return message_mask(message)
        if isinstance(recipe, str):
            return recipe
        return recipe[0] % recipe[1](message)

    def recipe(self, shape: bytes) -> _Recipe | None:
        """How to mask messages without ``0x`` of this shape (UTF-8, digits written as 1).

        None when the shape is not valid UTF-8 (raw bytes a decoder would replace).
        """
        if shape in self.recipes:
            return self.recipes[shape]
        try:
            text = shape.decode("utf-8")
        except UnicodeDecodeError:
            recipe = None
        else:
            recipe = _recipe_learn(text)
        if len(self.recipes) >= SHAPE_CACHE_SIZE:
            self.recipes.clear()
        self.recipes[shape] = recipe
        return recipe


def _recipe_learn(shape: str) -> _Recipe:
    masked = message_mask(shape)
    if "1" not in masked:
        return masked
    parts = []
    positions = []
    for piece in _mask_pieces(shape):
        if isinstance(piece, str):
            parts.append(piece)
            continue
        for i in range(*piece):
            if shape[i] == "1":
                parts.append("%s")
                positions.append(i)
            else:
                parts.append("%%" if shape[i] == "%" else shape[i])
    template, pick = "".join(parts), itemgetter(*positions)
    if template % pick(shape) == masked:
        if shape.isascii():
            offsets = tuple(positions)
        else:
            offsets = tuple(len(shape[:i].encode("utf-8")) for i in positions)
        return template, pick, offsets
    # Cannot happen while the argument in _mask_pieces holds; if it did, stay right.
    return "%s", message_mask, None
