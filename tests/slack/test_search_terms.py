"""The Slack search tokeniser, against answers written out by hand from the rules in docs/slack-search.md."""

from __future__ import annotations

import pytest

from api.slack.search import SearchError, parse
from api.slack.search_terms import MAX_TERM, MAX_WORDS, index_terms, matches, references, tokens


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello, World!", ["hello", "world"]),
    ("*Deploy* _now_ ~never~ `code`", ["deploy", "now", "never", "code"]),
    ("don't  _init_ 'quoted'", ["don't", "init", "quoted"]),
    ("CAFÉ Straße ＬＯＶＥ", ["café", "strasse", "love"]),
    ("vi\u0301deo", ["vídeo"]),
    ("東京都に行く", ["東京", "京都", "都に", "に行", "行く"]),
    ("a 猫 b", ["a", "猫", "b"]),
    ("tower東京", ["tower", "東京"]),
    ("서울 특별시", ["서울", "특별", "별시"]),
    ("see <https://example.org/a-b|the docs>", ["see", "the", "docs", "https", "example", "org", "a", "b"]),
    ("ping <@U12AB|ann> in <#C9Z|general>", ["ping", "in"]),
    ("fish &amp; chips &lt;b&gt;", ["fish", "chips", "b"]),
    ("<!here> look <!subteam^S1|@oncall>", ["here", "look", "oncall"]),
    (":tada: shipped", ["tada", "shipped"]),
])
def test_tokens(text, expected):
    assert tokens(text) == expected


def test_index_terms_keep_accents_both_ways_and_mentions():
    assert index_terms("Café naïve <@U12AB> <#C9Z|x> cafe") == ["@u12ab", "#c9z", "café", "cafe", "naïve", "naive"]


def test_long_words_and_long_messages_are_bounded():
    long_word = "x" * 200
    assert index_terms(long_word) == ["x" * MAX_TERM]
    many = " ".join(f"w{i}" for i in range(MAX_WORDS + 500))
    terms = index_terms(many)
    assert len(terms) == MAX_WORDS and terms[-1] == f"w{MAX_WORDS - 1}"


def test_references():
    assert references("hi <@U1AB> and <@W2CD|bob>, see <#C3EF|general>") == {"@u1ab", "@w2cd", "#c3ef"}
    assert references(None) == set()


def test_matches_sequences_and_accents():
    stream = tokens("the café was naïve about 東京都")
    assert matches(["cafe"], stream) and matches(["café"], stream)
    assert not matches(["café"], tokens("a cafe here"))  # an accented query asks for that spelling
    assert matches(["was", "naive"], stream) and not matches(["naive", "was"], stream)
    assert matches(["東京", "京都"], stream) and not matches(["京都", "東京"], stream)


def test_parse_reads_modifiers_phrases_and_exclusions():
    query = parse('deploy "rolled back" -flaky in:#ops from:@ann <@U1AB> #general after:2026-01-02 '
                  'before:2026-01-10 has:file has:reaction is:thread e-mail')
    assert query.words == [["deploy"], ["rolled", "back"], ["e", "mail"]]
    assert query.excluded == [["flaky"]]
    assert query.in_channels == ["#ops"] and query.from_users == ["@ann"]
    assert query.mentioned_users == ["U1AB"] and query.mentioned_channels == ["general"]
    assert (query.first.isoformat(), query.last.isoformat()) == ("2026-01-03", "2026-01-09")
    assert query.has_file and query.has_reaction and query.is_thread
    during = parse("x during:2024-02")
    assert (during.first.isoformat(), during.last.isoformat()) == ("2024-02-01", "2024-02-29")
    on = parse("x on:2024-02-03 during:2024")
    assert (on.first.isoformat(), on.last.isoformat()) == ("2024-02-03", "2024-02-03")


@pytest.mark.parametrize(("q", "reason"), [
    ("x before:yesterday", "before: takes a date"),
    ("x has:pin", "has: takes file, link or reaction"),
    ("x is:saved", "is: takes thread"),
    ("x in:", "in: needs a value"),
    ("x during:2024-13", "during: '2024-13' is not a month"),
])
def test_parse_rejects_what_it_cannot_read(q, reason):
    with pytest.raises(SearchError, match=reason):
        parse(q)


def test_flag_terms_say_which_has_and_is_hold():
    from api.slack.search_index import flag_terms

    def flags(**kw):
        base = {"files": None, "text": "plain", "message_content": None, "ts": 100, "thread_ts": None}
        return flag_terms(**{**base, **kw})

    assert flags() == []
    assert flags(text="see <https://x.org/a|the doc>") == ["has:link"]
    assert flags(message_content={"attachments": [{"title_link": "https://x.org"}]}) == ["has:link"]
    assert flags(files=[{"id": "F1"}], thread_ts=50, reacted=True) == ["has:file", "has:reaction", "is:thread"]
    assert flags(thread_ts=100) == []  # a thread head is one once it has replies
    assert flags(thread_ts=100, replied=True) == ["is:thread"]
