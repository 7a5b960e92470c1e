"""A message's text terms as a Bloom filter, carried on its author's and its channel's search postings.

A search driven by `from:` or `in:` reads the author's (channel's) postings of a day; with each posting's filter
it can drop, in memory, the candidates whose text certainly lacks a word or a mention of the query, instead of
looking every word up in its own postings (a statement per term and day). A filter never says "absent" for a
term the text has (no false negatives); it says "maybe" for about 0.6% of the terms it lacks (12 bits a term,
4 hashes), and confirmation against the message row drops those. Only terms of the text are in it: flags
(`has:reaction`, `is:thread`) change after the text is written, so they are always looked up.

Layout: one byte (the format, 1, in the high half; the number of hashes in the low half), two bytes of the
number of terms (big-endian), then the bit array, little-endian. The array has 12 bits per term, rounded up to
whole bytes, at least 64 bits: a 20-word message's filter is 33 bytes, the 2,000-term cap's 3 KB. A value of
another format proves nothing (every check passes): the format can change without a false negative.

Why the count leads: two writes of one message at the same write time (a live post and a history import of it with
attachments the live side never got) leave Cassandra to keep the greater value of each cell. The message row then
keeps the larger content, and with the count first the filter kept is the one of more terms, the richer version's,
not whichever bit pattern sorts higher.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

BITS_PER_TERM = 12
HASHES = 4
MIN_BITS = 64
FORMAT = 1
_HEADER = 3  # bytes before the bit array: the number of hashes, the number of terms

__all__ = ["build", "TermCheck"]


def _hashes(term: str) -> tuple[int, int]:
    digest = hashlib.blake2b(term.encode(), digest_size=16).digest()
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1


def _mask(hashes: tuple[int, int], bits: int, count: int) -> int:
    h1, h2 = hashes
    mask = 0
    for i in range(count):
        mask |= 1 << ((h1 + i * h2) % bits)
    return mask


def build(terms: Iterable[str]) -> bytes:
    """The filter of a message's text terms (search_terms.index_terms)."""
    distinct = set(terms)
    size = max(MIN_BITS, -(-len(distinct) * BITS_PER_TERM // 8) * 8)
    bits = 0
    for term in distinct:
        bits |= _mask(_hashes(term), size, HASHES)
    header = bytes([FORMAT << 4 | HASHES]) + min(len(distinct), 0xFFFF).to_bytes(2, "big")
    return header + bits.to_bytes(size // 8, "little")


class TermCheck:
    """Whether a filter may hold a term of each of some clauses (any term of a clause will do), for many filters:
    the masks are computed once per filter layout (format and hash count, size), and the clauses of one term
    (most) share one mask, so a filter is tested by one integer comparison."""

    def __init__(self, *clauses: Iterable[str]) -> None:
        self._clauses = [[_hashes(term) for term in clause] for clause in clauses]
        # layout -> (the mask of every one-term clause, the masks of each clause of several terms)
        self._masks: dict[tuple[int, int], tuple[int, list[list[int]]]] = {}

    def _masks_of(self, layout: tuple[int, int]) -> tuple[int, list[list[int]]]:
        first, size = layout
        count, bits = first & 0x0F, (size - _HEADER) * 8
        single, several = 0, []
        if first >> 4 == FORMAT and count and bits > 0:  # else no mask: a value of another format proves nothing
            for clause in self._clauses:
                # Shifted past the header: the filter is read whole as one little-endian integer.
                masks = [_mask(h, bits, count) << (8 * _HEADER) for h in clause]
                if len(masks) == 1:
                    single |= masks[0]
                else:
                    several.append(masks)
        self._masks[layout] = entry = (single, several)
        return entry

    def may_hold(self, term_filter: bytes) -> bool:
        """False only if the text the filter was built from lacks every term of a clause (a value this module
        did not write proves nothing: True)."""
        layout = (term_filter[0] if term_filter else 0, len(term_filter))
        single, several = self._masks.get(layout) or self._masks_of(layout)
        value = int.from_bytes(term_filter, "little")
        if value & single != single:
            return False
        return all(any(value & mask == mask for mask in masks) for masks in several)
