"""The tokeniser of Q6: which terms a post is indexed under, and which terms a search query asks for.

Both sides use the same rules (docs/network.md, "Tokenisation"), so a query finds a post exactly when every
query term is among the post's index terms:

* text is normalised to Unicode NFKC and case-folded (`vi\\u0301deo` and `vídeo` are one term, `Straße` is
  `strasse`, full-width `ＬＯＶＥ` is `love`);
* a word is a run of letters, digits, combining marks and underscores; an apostrophe between two word
  characters stays inside the word (`don't`, `rock'n'roll`; the typographic ’ and ʼ count as apostrophes);
  underscores and apostrophes at either end are dropped (`_init_` -> `init`, `'quoted'` -> `quoted`);
  anything else (spaces, punctuation, hyphens, emoji) separates words;
* `#tag` is indexed as the hashtag term `#tag` AND as the word `tag`; `@name` likewise as `@name` and `name`
  (a `#`/`@` right after a word character is not a sigil: `a@b.com` gives `a`, `b`, `com`);
* a URL (`http://`, `https://` or `www.`) is indexed as one term, its host without `www.` (`https://t.co/x`
  -> `t.co`): none of its parts become words, so a link never matches a query for `t`, `co` or `https`.

A query term is the single term each query token stands for: `#tag` asks for hashtag uses only, `tag` for
the word (which every `#tag` use also carries), a URL for its host.
"""

from __future__ import annotations

import re
import sys
import unicodedata

__all__ = ["index_terms", "query_terms"]


def _mark_ranges() -> str:
    """A regex class body of every combining mark (Mn, Mc, Me): Python's `\\w` leaves them out, which would
    cut Devanagari or Thai words at each vowel sign. Marks only exist in planes 0, 1 and 14."""
    spans: list[tuple[int, int]] = []
    for lo, hi in ((0, 0x20000), (0xE0000, 0xE1000)):
        for cp in range(lo, min(hi, sys.maxunicode + 1)):
            if unicodedata.category(chr(cp)).startswith("M"):
                if spans and spans[-1][1] == cp - 1:
                    spans[-1] = (spans[-1][0], cp)
                else:
                    spans.append((cp, cp))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in spans)


_W = rf"\w{_mark_ranges()}"  # a word character: letter, digit, mark or underscore
_TOKEN = re.compile(
    rf"(?P<url>(?<![{_W}])(?:https?://|www\.)\S*)"        # a link: consumed whole, indexed by its host
    rf"|(?:(?<![{_W}])(?P<sigil>[#@]))?"                  # a hashtag or mention sigil, not inside a word
    rf"(?P<word>[{_W}]+(?:'[{_W}]+)*)")                    # a word, apostrophes allowed between its letters
_HOST = re.compile(rf"[{_W}.\-]+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})


def _normalise(text: str) -> str:
    # NFKC first (composes `i` + U+0301, folds full-width forms), again after case folding, which can
    # leave decomposed sequences behind (`İ` folds to `i` + U+0307).
    folded = unicodedata.normalize("NFKC", text).translate(_APOSTROPHES).casefold()
    return unicodedata.normalize("NFKC", folded)


def _host(url: str) -> str | None:
    """`https://user@www.Example.com:8080/a?b` -> `example.com` (already case-folded); None when empty."""
    rest = url.split("://", 1)[1] if "://" in url else url
    netloc = re.split(r"[/?#\\]", rest, maxsplit=1)[0].rsplit("@", 1)[-1]
    match = _HOST.match(netloc)  # stops at a port, a closing bracket or other trailing punctuation
    host = match.group().removeprefix("www.").strip(".-") if match else ""
    return host or None


def _tokens(text: str) -> list[tuple[str | None, str | None]]:
    """(query term, extra index term) for each token in order: a hashtag or mention gives (`#tag`, `tag`),
    a word (`tag`, None), a URL (its host, None). A term is None when the token reduces to nothing (a lone
    underscore, a link without a host)."""
    out: list[tuple[str | None, str | None]] = []
    for m in _TOKEN.finditer(_normalise(text)):
        if m.group("url") is not None:
            out.append((_host(m.group("url")), None))
            continue
        word = m.group("word").strip("_'") or None
        sigil = m.group("sigil")
        if sigil:
            # The sigil term keeps the name as written (`@_katy` and `@katy` are different handles).
            out.append((sigil + m.group("word") if word else None, word))
        else:
            out.append((word, None))
    return out


def index_terms(text: str | None) -> set[str]:
    """The terms a post with this text is indexed under (see the module docstring for the rules)."""
    return {term for pair in _tokens(text or "") for term in pair if term}


def query_terms(q: str) -> list[str]:
    """The distinct terms a search query asks for, in the order given: one per token (`#tag` -> `#tag`
    only, `tag` -> `tag`, a URL -> its host). A post matches when it is indexed under all of them."""
    return list(dict.fromkeys(term for term, _extra in _tokens(q) if term))
