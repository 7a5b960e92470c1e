"""Activity-day codecs: every codec gives back exactly the events it was given, old codecs stay readable, an
unknown codec is a clear error, and the stored codec beats bzip2's ratio on seed 002's day and zstd-3 JSON on
Chronicle's days (sizes are deterministic; speed is measured in bench/codecs.py, not asserted here)."""

from __future__ import annotations

import random
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.activity import codec, store
from api.activity import events as ev
from bench.codecs import celebrity_day, seed_day, slack_day

_values = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=12),
    st.sampled_from(["0", "007", "12", "9" * 19, "U012AB"]),  # digit strings that must stay strings
    st.floats(allow_nan=False), st.booleans(), st.lists(st.integers(), max_size=3))
_event = st.dictionaries(st.sampled_from([*ev.FIELDS, "extra", "x"]), _values, max_size=6)
_kind_events = st.builds(
    lambda at, kind, extra: {"at": at, "kind": kind, **extra},
    st.integers(min_value=0, max_value=2**53), st.sampled_from(ev.KIND_ORDER),
    st.dictionaries(st.sampled_from(["channel", "ts", "user", "post", "words"]),
                    st.one_of(st.integers(0, 2**60), st.sampled_from(["C1", "U2", "42", "042"])), max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_event, _kind_events), max_size=40), st.sampled_from(list(codec.Codec)))
def test_every_codec_gives_back_the_events_it_was_given(events, which):
    assert codec.decode(codec.encode(events, which), which) == events


def test_columnar_days_of_every_shape_come_back_equal():
    rng = random.Random(5)
    for day in (seed_day(rng), slack_day(rng, 12), slack_day(rng, 500), slack_day(rng, 2000, bot=True),
                celebrity_day(rng, 3000), [], [{"at": 1, "kind": "post"}]):
        assert codec.decode(codec.encode(day), codec.Codec.COLUMNAR) == day


def test_a_day_whose_event_times_repeat_reads_back():
    # History stamps every reaction of a message with one time: `at` becomes a dictionary of few values, and
    # `ts` is stored relative to it (found by bench/activity.py: such days could not be decoded).
    day = [{"at": t, "kind": "reaction_received", "channel": "C1", "ts": t - 5, "emoji": "tada", "user": f"U{i}"}
           for t in (1_000_000_123, 2_000_777_000, 3_500_000_001) for i in range(6)]
    times = (1_000_000_123, 2_000_777_000, 3_500_000_001)
    day += [{"at": t, "kind": "message", "channel": "C1", "ts": t} for t in times]
    day = ev.in_order(day)
    assert codec.decode(codec.encode(day), codec.Codec.COLUMNAR) == day


def test_long_columns_take_the_numpy_path_and_write_the_same_bytes(monkeypatch):
    """Integer columns of NUMPY_FROM values or more are packed with numpy: the bytes equal the array/itertools
    path's, and both decode to the events."""
    rng = random.Random(5)
    days = [seed_day(rng), slack_day(rng, 2_000), slack_day(rng, 3_000, bot=True), celebrity_day(rng, 3_000)]
    with_numpy = [codec.columnar_layout(day) for day in days]
    decoded = [codec.from_columnar_layout(layout) for layout in with_numpy]
    monkeypatch.setattr(codec, "NUMPY_FROM", 10**9)
    assert [codec.columnar_layout(day) for day in days] == with_numpy
    assert [codec.from_columnar_layout(layout) for layout in with_numpy] == decoded == days


def test_an_unknown_codec_or_layout_is_a_clear_error():
    with pytest.raises(codec.UnknownCodec, match=r"unknown activity codec 99 \(known: 0=JSON"):
        codec.decode(b"[]", 99)
    with pytest.raises(codec.UnknownCodec, match="layout"):
        codec.from_columnar_layout(b"XX\x01\x00\x00")


def test_the_stored_codec_beats_bzip2s_ratio_twice_on_the_seed_day_and_zstd3_on_chronicle_days():
    rng = random.Random(11)
    seed = seed_day(rng)
    assert 450_000 < len(codec.to_json(seed)) < 650_000  # the seed's day is 489,601 bytes of JSON
    assert len(codec.encode(seed, codec.Codec.BZIP2_JSON)) >= 2 * len(codec.encode(seed))
    for day in (slack_day(rng, 12), slack_day(rng, 500), slack_day(rng, 5000, bot=True), celebrity_day(rng)):
        assert len(codec.encode(day)) < len(codec.encode(day, codec.Codec.ZSTD_JSON)), len(day)


def test_a_day_written_with_any_codec_reads_back_through_the_store(db):
    day = slack_day(random.Random(2), 40)
    for which in codec.Codec:
        account = f"U{which.value}CODEC"
        db.execute(*store.day_write("slack:TCODECS", account, date(2026, 3, 4), day, time_zone="UTC",
                                    built_at_us=store.now_us(), use=which))
        found = store.read_days(db, "slack:TCODECS", account, [date(2026, 3, 4)], contiguous=True)
        stored = found[date(2026, 3, 4)]
        assert (stored.events, stored.codec, stored.event_count) == (day, which.value, 40)
