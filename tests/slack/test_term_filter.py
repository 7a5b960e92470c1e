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


def test_a_check_of_several_clauses_passes_only_when_each_clause_may_be_held():
    rng = random.Random(11)
    held = {_word(rng) for _ in range(40)}
    absent = [_word(rng) + "q" for _ in range(400)]
    absent = [t for t in absent if not term_filter.TermCheck([t]).may_hold(term_filter.build(held))]
    built = term_filter.build(held)
    one, two, three = sorted(held)[:3]
    assert term_filter.TermCheck([one], [two], [three]).may_hold(built)
    assert term_filter.TermCheck([one], [absent[0], two]).may_hold(built)   # a clause of alternatives
    assert term_filter.TermCheck().may_hold(built)                          # no clause: nothing to fail
    for miss in absent[:100]:
        assert not term_filter.TermCheck([one], [miss]).may_hold(built)
        assert not term_filter.TermCheck([miss], [one], [two]).may_hold(built)
        assert not term_filter.TermCheck([one], [miss, absent[-1]]).may_hold(built)
    # the same clauses against filters of other sizes (each layout gets masks of its own)
    small = term_filter.build([one])
    assert term_filter.TermCheck([one]).may_hold(small)
    assert not term_filter.TermCheck([one], [absent[1]]).may_hold(small)


def test_layout_hashes_and_term_count_then_twelve_bits_a_term_at_least_sixty_four():
    assert len(term_filter.build([])) == 3 + 8
    assert len(term_filter.build([f"w{i}" for i in range(20)])) == 3 + 30
    assert len(term_filter.build([f"w{i}" for i in range(2000)])) == 3 + 3000
    assert term_filter.build(["a"])[:3] == bytes([0x10 | term_filter.HASHES, 0, 1])
    # not a filter this module wrote (another format, too short): proves nothing
    for foreign in (b"", b"\x00", b"\x14\x00\x01", b"\x04" + b"\x00" * 10, b"\x24" + b"\x00" * 10):
        assert term_filter.TermCheck(["a"]).may_hold(foreign), foreign


def test_of_two_filters_written_at_one_time_the_one_of_more_terms_sorts_greater():
    """Cassandra keeps the greater value when two writes of a cell carry the same timestamp: an edit and its
    unfurl (both at the edit's `edited.ts`) must leave the filter of the text with the unfurl's words, as the
    message row keeps the larger content. Checked over filters whose bits alone would often sort the other way."""
    rng = random.Random(3)
    reversed_by_bits = 0
    for _ in range(500):
        text = {_word(rng) for _ in range(rng.randint(1, 30))}
        richer = text | {_word(rng) + "q" for _ in range(rng.randint(1, 10))}
        poor, rich = term_filter.build(text), term_filter.build(richer)
        assert rich > poor
        reversed_by_bits += rich[3:] < poor[3:]
    assert reversed_by_bits > 50  # without the count first, the poorer filter would often win the tie
