"""The terms filter on the author's and the channel's search postings (api/slack/term_filter.py): it must never
say a text lacks a term it holds, and should rarely say it may hold one it lacks."""

from __future__ import annotations

import random
import string

from api.slack import search_terms, term_filter


def _word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 12)))


def test_no_term_of_the_text_is_ever_missed_and_few_absent_ones_pass():
    rng = random.Random(7)
    false_positives = absent_checks = 0
    for size in [0, 1, 2, 5, 20, 60, 300, 2000]:
        for _ in range(20 if size < 300 else 3):
            terms = {_word(rng) for _ in range(size)}
            built = term_filter.build(terms)
            for term in terms:
                assert term_filter.TermCheck([term]).may_hold(built), (size, term)
            for _ in range(200):
                other = _word(rng) + "x"
                if other in terms:
                    continue
                absent_checks += 1
                false_positives += term_filter.TermCheck([other]).may_hold(built)
    # 12 bits a term and 4 hashes: about 0.6% (filters of few terms, at 64 bits, do better)
    assert false_positives / absent_checks < 0.015, (false_positives, absent_checks)


def test_a_clause_passes_when_any_of_its_terms_may_be_held():
    built = term_filter.build(search_terms.index_terms("Café <@U024BE7LH|ann> 東京都 deploy"))
    assert term_filter.TermCheck(["cafe"]).may_hold(built)          # accents stripped are indexed too
    assert term_filter.TermCheck(["café"]).may_hold(built)
    assert term_filter.TermCheck(["@u024be7lh"]).may_hold(built)    # a mention, by id
    assert term_filter.TermCheck(["京都"]).may_hold(built)           # a CJK bigram
    assert term_filter.TermCheck(["nowhere-term", "deploy"]).may_hold(built)
    assert not term_filter.TermCheck(["rollback"]).may_hold(built)


def test_layout_one_byte_of_hashes_then_twelve_bits_a_term_at_least_sixty_four():
    assert len(term_filter.build([])) == 1 + 8
    assert len(term_filter.build([f"w{i}" for i in range(20)])) == 1 + 30
    assert len(term_filter.build([f"w{i}" for i in range(2000)])) == 1 + 3000
    assert term_filter.build(["a"])[0] == term_filter.HASHES
    assert term_filter.TermCheck(["a"]).may_hold(b"\x00")  # not a filter this module wrote: proves nothing
