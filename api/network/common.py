"""Small shared rules of the network feature: words, month buckets, ids, usernames, ranking order."""

from __future__ import annotations

import hashlib
import heapq
import os
import re
import time
from datetime import UTC, datetime

from api.network.tokens import index_terms

BUCKETS = 16  # accounts_by_follower_count partitions per network: ~5k rows each at 81k accounts
FORMER_NAME = "former_account"  # what others' posts show where they named an erased account (api/erasure)


def words_of(text: str | None) -> set[str]:
    """The terms a text is indexed under for Q6 (the rules are those of api/network/tokens.py)."""
    return index_terms(text)


def month_of(ts: datetime) -> str:
    return f"{ts.year:04d}-{ts.month:02d}"  # strftime does not zero-pad years below 1000


def bucket_of(account_id: int) -> int:
    return account_id % BUCKETS


def to_utc(ts: datetime) -> datetime:
    """Driver timestamps come back naive UTC; make them aware so JSON says +00:00."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def now_to_the_millisecond() -> datetime:
    """Now in UTC, to the millisecond: as a Cassandra timestamp stores it, so a value read back compares equal."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def iso(ts: datetime) -> str:
    return to_utc(ts).isoformat().replace("+00:00", "Z")


def parse_iso(value: str) -> datetime:
    return to_utc(datetime.fromisoformat(value.replace("Z", "+00:00")))


def new_post_id() -> int:
    """Time-ordered 63-bit id for posts created through the API: milliseconds << 22 | 22 random bits."""
    return (int(time.time() * 1000) << 22) | int.from_bytes(os.urandom(3), "big") & 0x3FFFFF


def stable_id(*parts: str) -> int:
    """A positive 63-bit id from the given text: the same input always gives the same id."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFFFFFFFFFF or 1


_ADJ = ("amber", "bold", "calm", "dusty", "eager", "fancy", "gentle", "happy", "icy", "jolly", "keen", "lucky",
        "mellow", "noble", "odd", "proud", "quiet", "rapid", "shy", "tidy", "urban", "vivid", "witty", "young")
_NOUN = ("otter", "falcon", "maple", "comet", "harbor", "lynx", "pepper", "raven", "willow", "tiger", "pixel",
         "canyon", "ember", "quartz", "meadow", "badger", "cobalt", "nomad", "orbit", "sparrow")


def generated_username(account_id: int) -> str:
    """Deterministic, unique (the id is in it) and readable: e.g. `quiet_otter_3kq9z`."""
    h = hashlib.blake2b(str(account_id).encode(), digest_size=4).digest()
    return f"{_ADJ[h[0] % len(_ADJ)]}_{_NOUN[h[1] % len(_NOUN)]}_{_base36(account_id)}"


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def heaviest(items: dict[int, int], limit: int) -> list[tuple[int, int]]:
    """(id, count) pairs with the highest counts, ties by lower id."""
    return heapq.nsmallest(limit, items.items(), key=lambda kv: (-kv[1], kv[0]))


NETWORK_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_NETWORK_RE = re.compile(NETWORK_PATTERN)


def valid_network_name(network: str) -> bool:
    """Network names: 1-64 letters, digits, '_' or '-' (they appear in URLs and keys)."""
    return bool(_NETWORK_RE.match(network))
