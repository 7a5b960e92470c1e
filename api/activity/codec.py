"""Codecs of activity days: an event list to bytes and back (docs/activity.md §3; the study: bench/codecs.py).

A stored day says which codec wrote it (`Codec`, an int in the row); every codec here stays readable for
good, so the codec can change without rewriting old days. `decode` is the one function that turns a stored
day back into events, used by the API and the scripts alike.

`COLUMNAR` is Chronicle's own layout (version 1): the events are split into one column per field; integer
columns are delta-encoded (or taken relative to the event's time, or dictionary-coded: whichever is smallest),
divided by the deltas' greatest common divisor, packed at the narrowest width that holds them and byte-shuffled
(all first bytes, then all second bytes, ...); string columns become a dictionary (first-appearance order) and
narrow codes; a field missing from some events gets a presence column. The layout is then compressed with zstd.
The layout byte by byte: `columnar_layout`. A typical day holds tens of events, where numpy's cost per call
would dominate: its columns are built and read with the standard library's `array` and `itertools` (loops in
C); integer columns of NUMPY_FROM values or more go through numpy.
"""

from __future__ import annotations

import bz2
import enum
import functools
import gzip
import json
import math
import operator
import sys
import threading
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate, compress, repeat
from typing import Any

import numpy as np
import zstandard

from api.activity.events import FIELDS, KIND_ORDER


class Codec(enum.IntEnum):
    """How a day's blob is encoded (stored as an int: never renumber, only add)."""

    JSON = 0  # UTF-8 JSON, uncompressed
    GZIP_JSON = 1  # JSON, gzip level 6
    BZIP2_JSON = 2  # JSON, bzip2 level 9 (seed 002's choice)
    ZSTD_JSON = 3  # JSON, zstd level 3
    COLUMNAR = 4  # Chronicle's columnar layout, zstd (below)


CURRENT = Codec.COLUMNAR
COLUMNAR_LAYOUT = 1
ZSTD_LEVEL = 9  # on the columnar layout (bench/codecs.py: higher levels gain < 1% and cost 3x the time)
SMALL_LAYOUT = 4096  # bytes of layout under which zstd runs at SMALL_LEVEL
# Most days are small, and there zstd's own set-up dominates: on the days of bench/activity.py (600 bytes stored
# on average) level 6 stores 3% more than level 19 at a tenth of the time (16 µs against 158 a day).
SMALL_LEVEL = 6


class UnknownCodec(ValueError):
    """A stored day names a codec (or a layout) this version of Chronicle cannot read."""


_local = threading.local()


def _zstd(level: int) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    # zstandard's (de)compressor objects must not be shared between threads.
    cache = getattr(_local, "zstd", None)
    if cache is None:
        cache = _local.zstd = {}
    if level not in cache:
        cache[level] = (zstandard.ZstdCompressor(level=level), zstandard.ZstdDecompressor())
    return cache[level]


def to_json(events: Sequence[dict[str, Any]]) -> bytes:
    return json.dumps(events, separators=(",", ":"), ensure_ascii=False).encode()


def encode(events: Sequence[dict[str, Any]], codec: Codec = CURRENT) -> bytes:
    if codec == Codec.COLUMNAR:
        layout = columnar_layout(events)
        return _zstd(SMALL_LEVEL if len(layout) < SMALL_LAYOUT else ZSTD_LEVEL)[0].compress(layout)
    raw = to_json(events)
    if codec == Codec.JSON:
        return raw
    if codec == Codec.GZIP_JSON:
        return gzip.compress(raw, compresslevel=6, mtime=0)
    if codec == Codec.BZIP2_JSON:
        return bz2.compress(raw, 9)
    if codec == Codec.ZSTD_JSON:
        return _zstd(3)[0].compress(raw)
    raise UnknownCodec(f"cannot encode with codec {codec!r}")


def decode(blob: bytes, codec: int) -> list[dict[str, Any]]:
    """The events of a stored day; UnknownCodec for a codec or layout this version does not know."""
    try:
        kind = Codec(codec)
    except ValueError:
        raise UnknownCodec(f"unknown activity codec {codec} (known: "
                           f"{', '.join(f'{c.value}={c.name}' for c in Codec)})") from None
    if kind == Codec.COLUMNAR:
        return from_columnar_layout(_zstd(ZSTD_LEVEL)[1].decompress(blob))
    if kind == Codec.JSON:
        raw = blob
    elif kind == Codec.GZIP_JSON:
        raw = gzip.decompress(blob)
    elif kind == Codec.BZIP2_JSON:
        raw = bz2.decompress(blob)
    else:
        raw = _zstd(3)[1].decompress(blob)
    return json.loads(raw)


# -- the columnar layout ---------------------------------------------------------------------------------------

# Column types (low bits of the type byte; PRESENCE set when a presence column follows).
DELTA, RELATIVE, DICTIONARY, DECIMAL, FLOAT, JSON_VALUES, INT_DICTIONARY, KNOWN_KINDS, JOINED_DICTIONARY = range(1, 10)
# Event kinds by their position in events.KIND_ORDER (append only): one byte each, no dictionary stored.
_KIND_CODES = {kind: i for i, kind in enumerate(KIND_ORDER)}
PRESENCE = 0x80


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7


def _zigzag(n: int) -> int:
    return n * 2 if n >= 0 else -n * 2 - 1


def _unzigzag(n: int) -> int:
    return n // 2 if not n & 1 else -(n + 1) // 2


def _shuffle(data: bytes, width: int) -> bytes:
    """All first bytes of the values, then all second bytes...: the high bytes of small numbers line up as runs
    of zeros that zstd removes."""
    if width == 1:
        return data
    return b"".join(data[i::width] for i in range(width))


def _unshuffle(data: bytes, width: int) -> bytes:
    if width == 1:
        return data
    n = len(data) // width
    out = bytearray(len(data))
    for i in range(width):
        out[i::width] = data[i * n:(i + 1) * n]
    return bytes(out)


# Signed array typecodes by width, with the range each holds; packed values are little-endian.
_SIGNED = tuple((code, width, -(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1)
                for code, width in (("b", 1), ("h", 2), ("i", 4), ("q", 8)))
_SIGNED_BY_WIDTH = {width: code for code, width, _lo, _hi in _SIGNED}
_UNSIGNED = (("B", 1, 2**8 - 1), ("H", 2, 2**16 - 1), ("I", 4, 2**32 - 1))
_BIG_ENDIAN = sys.byteorder == "big"


def _packed(values: list[int]) -> tuple[int, bytes]:
    """(width, shuffled bytes) of signed integers at the narrowest width: all first bytes, then all second
    bytes...; the high bytes of small numbers line up as runs of zeros that zstd removes."""
    lo, hi = (min(values), max(values)) if values else (0, 0)
    code, width = next((c, w) for c, w, low, high in _SIGNED if low <= lo and hi <= high)
    packed = array(code, values)
    if _BIG_ENDIAN:
        packed.byteswap()
    return width, _shuffle(packed.tobytes(), width)


def _checked_width(width: int, data: bytes) -> int:
    if width not in _SIGNED_BY_WIDTH or len(data) % width:
        raise UnknownCodec(f"an integer column of width {width} holding {len(data)} bytes")
    return width


def _unpacked(width: int, data: bytes) -> list[int]:
    values = array(_SIGNED_BY_WIDTH[_checked_width(width, data)], _unshuffle(data, width))
    if _BIG_ENDIAN:
        values.byteswap()
    return values.tolist()


# Columns of at least this many values go through numpy (one call per pass instead of one C loop per value
# and pass): seed 002's 4,320-event day encodes in 3.0 ms instead of 4.7. Shorter ones stay in array/itertools,
# where numpy's cost per call dominates. Both write the same bytes.
NUMPY_FROM = 512
_NP_SIGNED = tuple(np.dtype(f"<i{width}") for width in (1, 2, 4, 8))


def _np_packed(values: np.ndarray) -> tuple[int, bytes]:
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    kind = next(t for t in _NP_SIGNED if -(1 << (8 * t.itemsize - 1)) <= lo and hi < (1 << (8 * t.itemsize - 1)))
    return kind.itemsize, values.astype(kind).view(np.uint8).reshape(-1, kind.itemsize).T.tobytes()


def _np_int_payload(values: np.ndarray) -> bytes:
    deltas = np.diff(values)
    step = int(np.gcd.reduce(deltas)) if deltas.size else 0
    step = step or 1
    if step > 1:
        deltas //= step
    width, packed = _np_packed(deltas)
    return _varint(_zigzag(int(values[0]))) + _varint(step) + bytes((width,)) + packed


def _np_int_column(values: list[int], at: list[int] | None) -> list[tuple[int, bytes]]:
    column = np.array(values, dtype=np.int64)
    found = [(DELTA, _np_int_payload(column))]
    if at is not None:
        width, packed = _np_packed(column - np.array(at, dtype=np.int64))
        found.append((RELATIVE, bytes((width,)) + packed))
    distinct, codes = np.unique(column, return_inverse=True)
    if distinct.size * 4 <= column.size:
        table = _np_int_payload(distinct)
        size = next(w for _c, w, high in _UNSIGNED if distinct.size <= high)
        found.append((INT_DICTIONARY, _varint(len(table)) + table + bytes((size,))
                      + codes.astype(f"<u{size}").tobytes()))
    return found


def _int_payload(values: list[int]) -> bytes:
    deltas = list(map(operator.sub, values[1:], values))
    step = math.gcd(*deltas) or 1
    if step > 1:
        deltas = list(map(step.__rfloordiv__, deltas))
    width, packed = _packed(deltas)
    return _varint(_zigzag(values[0])) + _varint(step) + bytes((width,)) + packed


def _ints_from(payload: bytes) -> list[int]:
    first, pos = _read_varint(payload, 0)
    step, pos = _read_varint(payload, pos)
    packed = payload[pos + 1:]
    width = _checked_width(payload[pos], packed)
    if len(packed) >= NUMPY_FROM * width:
        planes = np.frombuffer(packed, dtype=np.uint8).reshape(width, -1)
        deltas = np.ascontiguousarray(planes.T).view(_NP_SIGNED[width.bit_length() - 1]).ravel().astype(np.int64)
        out = np.empty(deltas.size + 1, dtype=np.int64)
        out[0] = _unzigzag(first)
        np.cumsum(deltas * step, out=out[1:])
        out[1:] += out[0]
        return out.tolist()
    deltas = _unpacked(width, packed)
    return list(accumulate(deltas if step == 1 else map(step.__mul__, deltas), initial=_unzigzag(first)))


def _codes(values: list[str] | list[int], distinct: list) -> bytes:
    index = {v: i for i, v in enumerate(distinct)}
    code, size = next((c, w) for c, w, high in _UNSIGNED if len(distinct) <= high)
    codes = array(code, map(index.__getitem__, values))
    if _BIG_ENDIAN:
        codes.byteswap()
    return bytes((size,)) + codes.tobytes()


def _from_codes(data: bytes, table: list) -> list:
    code = next(c for c, w, _ in _UNSIGNED if w == data[0])
    codes = array(code, data[1:])
    if _BIG_ENDIAN:
        codes.byteswap()
    return list(map(table.__getitem__, codes))


def _str_payload(values: list[str]) -> tuple[int, bytes]:
    """A dictionary of the distinct strings in first-appearance order, then one code per value; the strings
    joined by NUL when none holds one (decoded by one split), else each with its length."""
    distinct = list(dict.fromkeys(values))
    codes = _codes(values, distinct)
    if not any("\x00" in v for v in distinct):
        joined = "\x00".join(distinct).encode()
        return JOINED_DICTIONARY, _varint(len(distinct)) + _varint(len(joined)) + joined + codes
    words = b"".join(_varint(len(e)) + e for e in (w.encode() for w in distinct))
    return DICTIONARY, _varint(len(distinct)) + words + codes


def _strs_from(payload: bytes) -> list[str]:
    count, pos = _read_varint(payload, 0)
    words = []
    for _ in range(count):
        length, pos = _read_varint(payload, pos)
        words.append(payload[pos:pos + length].decode())
        pos += length
    return _from_codes(payload[pos:], words)


def _joined_strs_from(payload: bytes) -> list[str]:
    count, pos = _read_varint(payload, 0)
    length, pos = _read_varint(payload, pos)
    words = payload[pos:pos + length].decode().split("\x00") if count else []
    if len(words) != count:
        raise UnknownCodec(f"a dictionary of {count} strings holds {len(words)}")
    return _from_codes(payload[pos + length:], words)


def _decimal_ints(values: list[str]) -> list[int] | None:
    """Numbers written as decimal strings (network account ids) as ints, when they all come back unchanged."""
    if not all(map(str.isdigit, values)) or max(map(len, values)) > 18:
        return None
    numbers = list(map(int, values))
    return numbers if list(map(str, numbers)) == values else None


def _int_column(values: list[int], at: list[int] | None) -> tuple[int, bytes]:
    """The smallest of: deltas from the previous value; offsets from the event's time (a message's ts is its
    event time, a reaction's an earlier message's: mostly zero or small); a dictionary of the distinct values
    (a celebrity's likes land on a few hundred posts)."""
    if len(values) >= NUMPY_FROM:
        return min(_np_int_column(values, at), key=lambda kind_payload: len(kind_payload[1]))
    found = [(DELTA, _int_payload(values))]
    if at is not None:  # both within 62 bits: the offsets fit 64
        width, packed = _packed(list(map(operator.sub, values, at)))
        found.append((RELATIVE, bytes((width,)) + packed))
    distinct = set(values)
    if len(distinct) * 4 <= len(values):
        ordered = sorted(distinct)
        table = _int_payload(ordered)
        found.append((INT_DICTIONARY, _varint(len(table)) + table + _codes(values, ordered)))
    return min(found, key=lambda kind_payload: len(kind_payload[1]))


def _is_int_column(values: list[Any]) -> bool:
    """Integers of at most 62 bits (so that differences fit 64), no bool."""
    return set(map(type, values)) == {int} and min(values) > -2**62 and max(values) < 2**62


def _column(name: str, values: list[Any], at: list[int] | None) -> tuple[int, bytes]:
    """(type, payload) of one column's present values; `at` holds the event times at the same positions."""
    if _is_int_column(values):
        return _int_column(values, at)
    types = set(map(type, values))  # map/set/min/max run in C: these loops decide the codec's speed
    if types == {str}:
        if name == "kind" and set(values) <= _KIND_CODES.keys():
            return KNOWN_KINDS, bytes(map(_KIND_CODES.__getitem__, values))
        numbers = _decimal_ints(values)
        if numbers is not None:
            return DECIMAL, _int_payload(numbers)
        return _str_payload(values)
    if types == {float}:
        return FLOAT, _shuffle(array("d", values).tobytes(), 8)
    return JSON_VALUES, json.dumps(values, separators=(",", ":"), ensure_ascii=False).encode()


def columnar_layout(events: Sequence[dict[str, Any]]) -> bytes:
    """The uncompressed columnar layout of `events`:

        b"CA" | layout:u8 | events:varint | columns:varint | per column:
        field:u8 (1 + index in events.FIELDS, or 0 then name-len:varint name) | type:u8 (| 0x80: presence follows)
        | [presence: one 0/1 byte per event] | payload-len:varint | payload

        DELTA:      first:zigzag varint | gcd:varint | width:u8 | shuffled (deltas / gcd)
        RELATIVE:   width:u8 | shuffled (value - the event's `at`)
        DICTIONARY: count:varint | each distinct string (first-appearance order): len:varint utf8 | width:u8 |
                    codes (u8/u16/u32 little-endian)
        JOINED_DICTIONARY: count:varint | joined-len:varint | the distinct strings joined by NUL (written when
                    none holds a NUL) | width:u8 | codes
        KNOWN_KINDS: one byte per event: the kind's index in events.KIND_ORDER
        INT_DICTIONARY: table-len:varint | the distinct values as a DELTA payload | width:u8 | codes
        DECIMAL:    decimal-string numbers as a DELTA payload
        FLOAT:      shuffled float64 values
        JSON_VALUES: JSON list of the values (anything else)
    """
    first = list(events[0]) if events else []
    columns: dict[str, list[Any]] | None = None
    if sum(map(len, events)) == len(first) * len(events):
        # As many fields in all as the first event has times the events: if each event has the first one's
        # fields, it has no others, and itemgetter (in C) takes every column.
        try:
            columns = {name: list(map(operator.itemgetter(name), events)) for name in first}
        except KeyError:
            columns = None
    if columns is None:
        names = set().union(*events)
        columns = {name: list(map(dict.get, events, repeat(name))) for name in names}
    ordered = [f for f in FIELDS if f in columns] + [f for f in first if f not in FIELDS] + sorted(
        set(columns).difference(FIELDS, first))
    at_values = columns.get("at")
    at_column = None  # the event times, when stored as integers (the decoder's condition: see there)
    if at_values is not None and _is_int_column(at_values):
        at_column = at_values
    parts = [b""]
    written = 0
    for name in ordered:
        column = columns[name]
        missing = column.count(None)
        if missing == len(column):
            continue
        present = None if not missing else bytes(map(operator.is_not, column, repeat(None)))
        values = column if not missing else list(compress(column, present))
        at = None
        if at_column is not None and name != "at":
            at = at_column if present is None else list(compress(at_column, present))
        kind, payload = _column(name, values, at)
        if name in _FIELD_IDS:
            head = bytes((_FIELD_IDS[name],))
        else:
            encoded = name.encode()
            head = b"\x00" + _varint(len(encoded)) + encoded
        parts.append(head + bytes((kind | (PRESENCE if present is not None else 0),)))
        if present is not None:
            parts.append(present)
        parts.append(_varint(len(payload)) + payload)
        written += 1
    parts[0] = b"CA" + bytes((COLUMNAR_LAYOUT,)) + _varint(len(events)) + _varint(written)
    return b"".join(parts)


_FIELD_IDS = {name: i + 1 for i, name in enumerate(FIELDS)}


def from_columnar_layout(data: bytes) -> list[dict[str, Any]]:
    if data[:2] != b"CA" or data[2] != COLUMNAR_LAYOUT:
        raise UnknownCodec(f"not a columnar activity day of layout {COLUMNAR_LAYOUT} (starts {data[:3]!r})")
    n, pos = _read_varint(data, 3)
    n_columns, pos = _read_varint(data, pos)
    full_names: list[str] = []
    full_columns: list[list[Any]] = []
    partial_columns: list[tuple[str, bytes, list[Any]]] = []  # (name, presence, the present values)
    at_column: list[int] | None = None
    for _ in range(n_columns):
        field = data[pos]
        pos += 1
        if field:
            if field > len(FIELDS):
                raise UnknownCodec(f"unknown field id {field}")
            name = FIELDS[field - 1]
        else:
            length, pos = _read_varint(data, pos)
            name, pos = data[pos:pos + length].decode(), pos + length
        kind, has_presence = data[pos] & 0x7F, data[pos] & PRESENCE
        pos += 1
        presence = None
        if has_presence:
            presence, pos = data[pos:pos + n], pos + n
        length, pos = _read_varint(data, pos)
        payload, pos = data[pos:pos + length], pos + length
        if kind in (DELTA, DECIMAL):
            values: list[Any] = _ints_from(payload)
            if kind == DECIMAL:
                values = list(map(str, values))
        elif kind == RELATIVE:
            if at_column is None:
                raise UnknownCodec("a relative column without event times")
            at = at_column if presence is None else list(compress(at_column, presence))
            values = list(map(operator.add, _unpacked(payload[0], payload[1:]), at))
        elif kind == JOINED_DICTIONARY:
            values = _joined_strs_from(payload)
        elif kind == DICTIONARY:
            values = _strs_from(payload)
        elif kind == KNOWN_KINDS:
            values = list(map(KIND_ORDER.__getitem__, payload))
        elif kind == INT_DICTIONARY:
            length, start = _read_varint(payload, 0)
            values = _from_codes(payload[start + length:], _ints_from(payload[start:start + length]))
        elif kind == FLOAT:
            values = array("d", _unshuffle(payload, 8)).tolist()
        elif kind == JSON_VALUES:
            values = json.loads(payload)
        else:
            raise UnknownCodec(f"unknown column type {kind}")
        if name == "at" and presence is None and kind in (DELTA, INT_DICTIONARY):  # the encoder's condition
            at_column = values
        if presence is None:
            full_names.append(name)
            full_columns.append(values)
        else:
            partial_columns.append((name, presence, values))
    rows = list(map(_row_builder(tuple(full_names)), *full_columns)) if full_columns else [{} for _ in range(n)]
    for name, presence, values in partial_columns:
        # rows[i][name] = value for each present i, all in C (compress picks the rows, setitem sets).
        deque(map(operator.setitem, compress(rows, presence), repeat(name), values), maxlen=0)
    return rows


@functools.lru_cache(maxsize=64)
def _row_builder(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function (a0, a1, ...) -> {names[0]: a0, ...}: CPython builds a dict display 2.5x faster than
    dict(zip(...)), and decoding is mostly building the events' dicts. Names enter only as repr() literals."""
    args = ", ".join(f"a{i}" for i in range(len(names)))
    body = ", ".join(f"{name!r}: a{i}" for i, name in enumerate(names))
    return eval(f"lambda {args}: {{{body}}}", {"__builtins__": {}})  # noqa: S307 - literals only, see above
