"""The tokeniser of Slack archive search: which terms a message is indexed under, and the token stream a
search confirms phrases against. Pure functions, no database. The rules (docs/slack-search.md):

* Slack's markup is read first: `&amp;` `&lt;` `&gt;` are the characters they stand for; a user mention
  `<@U1|ann>` is the term `@u1`, a channel reference `<#C1|general>` the term `#c1` (ids, so a rename or a
  new display name never changes what a message is found by); a link `<https://x.org/a|label>` gives the
  words of its label and of its address; `<!here>` and `<!subteam^S1|@team>` give their label's words;
* text is normalised (api/text.py: NFKC, case folding) and split into words: runs of letters, digits,
  combining marks and underscores, with an apostrophe allowed between two word characters (`don't`);
  underscores and apostrophes at either end are dropped;
* Chinese, Japanese and Korean runs have no spaces between words: such a run is indexed by its overlapping
  character bigrams (`東京都` -> `東京`, `京都`; a single character stands alone), and a query's CJK run asks
  for its bigrams in sequence (a phrase), so `東京都` does not match `京都 ... 東京`;
* accents stay searchable both ways: a word with accents is indexed as written AND without its accents
  (`café` under `café` and `cafe`); a query word with accents asks for that spelling only, one without
  accents finds both (`cafe` finds `café` and `cafe`, `café` finds only `café`);
* a term is at most 64 characters (a longer word is indexed by its first 64; the whole word is still
  compared when results are confirmed), and a message is indexed under at most its first 2,000 distinct words
  (a 100 KB paste does not write 15,000 postings).
"""

from __future__ import annotations

import html
import re

from api.text import WORD_ALL, WORD_BMP, normalise, strip_accents

__all__ = ["MAX_TERM", "MAX_WORDS", "Token", "index_terms", "matches", "references", "term_of", "tokens"]

MAX_TERM = 64
MAX_WORDS = 2000

# <@U123>, <@U123|label>, <#C123>, <#C123|name>, <!here>, <!subteam^S1|@team>, <https://x|label>, <mailto:...>
_ANGLE = re.compile(r"<([@#!]?)([^<>|]*)(?:\|([^<>]*))?>")
_WORD_BMP = re.compile(rf"[{WORD_BMP}]+(?:'[{WORD_BMP}]+)*")
_WORD_ALL = re.compile(rf"[{WORD_ALL}]+(?:'[{WORD_ALL}]+)*")
# Han (with extensions and compatibility ideographs), Hiragana, Katakana, Hangul jamo and syllables.
_CJK = re.compile(
    "([\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\U00020000-\U0002fa1f]+)")

# A token: (the word as written after normalising, is it a CJK bigram). Mentions are their own terms.
Token = str


def _plain(text: str) -> tuple[str, list[str]]:
    """The text with Slack's markup replaced by what is searchable in it, and the mention terms it holds."""
    refs: list[str] = []

    def replace(match: re.Match[str]) -> str:
        sigil, body, label = match.groups()
        if sigil in ("@", "#") and body:
            refs.append(sigil + body.casefold())
            return " "
        if sigil == "!":
            return f" {label or body.split('^', 1)[0]} "
        return f" {label or ''} {body} "

    return html.unescape(_ANGLE.sub(replace, text)) if "<" in text or "&" in text else text, refs


def _groups(word: str) -> list[list[Token]]:
    """One word as token groups: the word itself, or each CJK run as its bigrams and the rest as words."""
    if word.isascii() or not _CJK.search(word):
        return [[word]]
    out: list[list[Token]] = []
    for part in _CJK.split(word):
        if _CJK.fullmatch(part):
            out.append([part] if len(part) == 1 else [part[i:i + 2] for i in range(len(part) - 1)])
        elif part.strip("_'"):
            out.append([part.strip("_'")])
    return out


def _words(text: str) -> list[list[Token]]:
    plain = normalise(text)
    pattern = _WORD_ALL if plain and max(plain) > "\uffff" else _WORD_BMP
    return [group for word in pattern.findall(plain) if word.strip("_'") for group in _groups(word.strip("_'"))]


def tokens(text: str | None) -> list[Token]:
    """The words of a text in order (CJK runs as bigrams), normalised: what phrases are confirmed against."""
    if not text:
        return []
    return [token for group in _words(_plain(text)[0]) for token in group]


def term_of(token: Token) -> str:
    """The index term of a token (its first MAX_TERM characters)."""
    return token[:MAX_TERM]


def index_terms(text: str | None) -> list[str]:
    """The terms a message with this text is indexed under, in first-seen order (mentions, then words; accented
    words also without accents); at most MAX_WORDS distinct words."""
    if not text:
        return []
    _plain_text, refs = _plain(text)
    out: dict[str, None] = dict.fromkeys(term_of(r) for r in refs)
    words = 0
    for token in tokens(text):
        term = term_of(token)
        if term in out:
            continue
        words += 1
        if words > MAX_WORDS:
            break
        out[term] = None
        bare = strip_accents(term)
        if bare != term:
            out.setdefault(bare, None)
    return list(out)


def references(text: str | None) -> set[str]:
    """The mention terms of a text: `@u…` for each user mentioned, `#c…` for each channel referenced."""
    return {term_of(r) for r in _plain(text)[1]} if text else set()


def matches(query: list[Token], stream: list[Token]) -> bool:
    """Whether the query tokens occur in `stream` one after the other. A query token without accents also
    matches a token that has them (`cafe` matches `café`); one with accents matches only itself."""
    n = len(query)
    if n == 0:
        return True
    bare = [q == strip_accents(q) for q in query]
    for i in range(len(stream) - n + 1):
        for j in range(n):
            token, q = stream[i + j], query[j]
            if token != q and not (bare[j] and strip_accents(token) == q):
                break
        else:
            return True
    return False
