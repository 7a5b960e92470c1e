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

from api.text import WORD_ALL, WORD_BMP, normalise

__all__ = ["index_terms", "query_terms"]


def _token_pattern(w: str) -> re.Pattern[str]:
    """The token regex for a word-character class body `w`."""
    return re.compile(
        rf"(?P<url>(?<![{w}])(?:https?://|www\.)\S*)"        # a link: consumed whole, indexed by its host
        rf"|(?:(?<![{w}])(?P<sigil>[#@]))?"                  # a hashtag or mention sigil, not inside a word
        rf"(?P<word>[{w}]+(?:'[{w}]+)*)")                    # a word, apostrophes allowed between its letters


_TOKEN_BMP, _TOKEN_ALL = _token_pattern(WORD_BMP), _token_pattern(WORD_ALL)
_HOST = re.compile(rf"[{WORD_ALL}.\-]+")


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
    text = normalise(text)
    pattern = _TOKEN_ALL if text and max(text) > "\uffff" else _TOKEN_BMP
    out: list[tuple[str | None, str | None]] = []
    for url, sigil, name in pattern.findall(text):  # findall: tuples are ~2x cheaper than match objects
        if url:
            out.append((_host(url), None))
            continue
        word = name.strip("_'") or None
        if sigil:
            # The sigil term keeps the name as written (`@_katy` and `@katy` are different handles).
            out.append((sigil + name if word else None, word))
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
