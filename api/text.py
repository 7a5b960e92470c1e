"""Text rules shared by the word searches (follower network Q6, Slack archive search): Unicode normalisation
and what a word character is. Pure functions, no database.

* `normalise`: NFKC, typographic apostrophes to `'`, case folding, NFKC again (`vi\\u0301deo` and `vídeo` are
  one form, `Straße` is `strasse`, full-width `ＬＯＶＥ` is `love`);
* a word character (`WORD_BMP`, `WORD_ALL`, regex class bodies) is a letter, digit, combining mark or
  underscore: Python's `\\w` leaves combining marks out, which would cut Devanagari or Thai words at each
  vowel sign.
"""

from __future__ import annotations

import sys
import unicodedata

__all__ = ["WORD_ALL", "WORD_BMP", "normalise", "strip_accents"]


def _mark_ranges(planes: tuple[tuple[int, int], ...]) -> str:
    """A regex class body of every combining mark (Mn, Mc, Me) in the given code point ranges."""
    spans: list[tuple[int, int]] = []
    for lo, hi in planes:
        for cp in range(lo, min(hi, sys.maxunicode + 1)):
            if unicodedata.category(chr(cp)).startswith("M"):
                if spans and spans[-1][1] == cp - 1:
                    spans[-1] = (spans[-1][0], cp)
                else:
                    spans.append((cp, cp))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in spans)


# Marks exist only in planes 0, 1 and 14; a class with ranges beyond the BMP makes every match about 3x slower,
# so texts without such characters (nearly all) use the BMP-only class, with the same answers.
WORD_BMP = rf"\w{_mark_ranges(((0, 0x10000),))}"
WORD_ALL = rf"{WORD_BMP}{_mark_ranges(((0x10000, 0x20000), (0xE0000, 0xE1000)))}"
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})


def normalise(text: str) -> str:
    if text.isascii():  # ASCII is already NFKC, and stays ASCII when case-folded
        return text.casefold()
    # NFKC first (composes `i` + U+0301, folds full-width forms), again after case folding, which can
    # leave decomposed sequences behind (`İ` folds to `i` + U+0307).
    folded = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()
    return unicodedata.normalize("NFKC", folded)


def strip_accents(word: str) -> str:
    """`café` -> `cafe`, `naïve` -> `naive`: the word without its combining marks (of a normalised word).
    Scripts whose letters need their marks (Devanagari vowel signs) lose them too; callers keep both forms."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFD", word)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))
