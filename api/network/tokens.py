"""Terms of the Q6 index (interim: runs of letters or digits, case-folded)."""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)


def index_terms(text: str | None) -> set[str]:
    return set(_WORD_RE.findall((text or "").casefold()))


def query_terms(q: str) -> list[str]:
    seen: list[str] = []
    for token in q.split():
        for w in sorted(index_terms(token)):
            if w not in seen:
                seen.append(w)
    return seen
