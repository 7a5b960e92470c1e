"""The Q6 tokeniser, rule by rule, against hand-written expectations (docs/network.md, "Tokenisation")."""

from __future__ import annotations

from api.network.tokens import index_terms, query_terms


def matches(query: str, text: str) -> bool:
    """What Q6 answers: a post matches when it is indexed under every term of the query."""
    terms = query_terms(query)
    return bool(terms) and set(terms) <= index_terms(text)


def test_unicode_normalisation_and_case_folding():
    decomposed, composed = "vi\u0301deo", "v\u00eddeo"
    assert decomposed != composed
    assert index_terms(decomposed) == index_terms(composed) == {"v\u00eddeo"}
    assert query_terms("VI\u0301DEO") == ["v\u00eddeo"]
    assert matches(decomposed, "Nuevo V\u00cdDEO hoy")
    assert index_terms("Stra\u00dfe STRASSE") == {"strasse"}          # case folding, not lower()
    assert index_terms("\uff2c\uff2f\uff36\uff25 \ufb01ne") == {"love", "fine"}  # full-width, ligature (NFKC)
    assert index_terms(None) == set() and index_terms("") == set()


def test_apostrophes_inside_words():
    assert index_terms("don't") == {"don't"}
    assert index_terms("Don\u2019t DON\u02bcT") == {"don't"}             # typographic apostrophes
    assert index_terms("rock'n'roll") == {"rock'n'roll"}
    assert index_terms("'quoted' fans' ''") == {"quoted", "fans"}        # at the ends: dropped
    assert query_terms("don\u2019t") == ["don't"]
    assert not matches("t", "don't stop")
    assert not matches("don", "don't stop")


def test_underscores_inside_words():
    assert index_terms("ricky_martin") == {"ricky_martin"}
    assert index_terms("_init_ ___ a__b") == {"init", "a__b"}
    assert not matches("ricky", "I love ricky_martin")
    assert matches("Ricky_Martin", "I love ricky_martin")


def test_urls_are_indexed_as_their_host():
    assert index_terms("https://t.co/AbC123") == {"t.co"}
    assert index_terms("see HTTP://www.YouTube.com/watch?v=x1") == {"see", "youtube.com"}
    assert index_terms("(https://user@example.org:8080/a#b).") == {"example.org"}
    assert index_terms("https://[::1]/x www.") == set()                 # no host name: no term
    link = "Loved it https://t.co/abcXYZ0123"
    for word in ("t", "co", "https", "abcxyz0123"):
        assert not matches(word, link), word
    assert matches("https://t.co", link) and matches("http://t.co/other", link)
    assert query_terms("t.co") == ["t", "co"]                           # a bare host is two words


def test_hashtags_and_mentions():
    assert index_terms("#Love") == {"#love", "love"}
    assert index_terms("@KatyPerry") == {"@katyperry", "katyperry"}
    assert index_terms("@_katy_") == {"@_katy_", "katy"}                # the handle as written
    assert index_terms("a@b.com C# x#y") == {"a", "b", "com", "c", "x", "y"}  # not after a word character
    assert index_terms("##tour !#tour") == {"#tour", "tour"}
    assert index_terms("# @ #_") == set()
    assert query_terms("#tag") == ["#tag"] and query_terms("tag") == ["tag"]
    assert matches("#tag", "a #tag here") and not matches("#tag", "a tag here")
    assert matches("tag", "a #tag here") and matches("tag", "a tag here")
    assert matches("@katy", "hi @Katy") and not matches("@katy", "hi katy") and matches("katy", "hi @katy")


def test_digits_and_separators():
    assert index_terms("covid19 2017 3.14 #1") == {"covid19", "2017", "3", "14", "#1", "1"}
    assert index_terms("e-mail,love;tour/now \U0001f600ok") == {"e", "mail", "love", "tour", "now", "ok"}
    assert index_terms("\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e") == {
        "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0926\u0941\u0928\u093f\u092f\u093e"}  # vowel signs stay in
    assert index_terms("x a\U0001d167b love\U0001f600tour") == {"x", "a\U0001d167b", "love", "tour"}  # beyond the BMP


def test_query_terms_are_distinct_and_in_order():
    assert query_terms("Tour LOVE tour #love love") == ["tour", "love", "#love"]
    assert query_terms("... !!! https://[::1]") == []
