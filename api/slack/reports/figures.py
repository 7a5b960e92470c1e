"""Every figure of a report, from one pass over the channel-day partitions of the period and the one before it.

Reads (all bounded; no scan, no filtering): the channel index (one partition), each channel's day listing in
the window (one partition per channel), the listed channel-day partitions of slack_messages (at most
2 x days per channel), the 8 user buckets, and each reported channel's member-count log in the window.

Which messages count (docs/slack-reports.md): a message that arrived (not only state that came before it),
not deleted, posted by a person (a user id, no bot id) and without a subtype, except the three subtypes that
are a person's own post: thread_broadcast, file_share, me_message. Seed 000 left every subtype out; those
three are ordinary posts in today's Slack, so leaving them out would drop people's replies and uploads.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import heapq
import statistics
import time
import zoneinfo
from collections import Counter
from collections.abc import Iterable
from typing import Any

from api.db import Database
from api.slack import channels, messages, users
from api.slack.reports.period import Period
from api.slack.timeutil import US_PER_DAY, US_PER_SECOND, us_to_ts

COUNTED_SUBTYPES = frozenset({None, "thread_broadcast", "file_share", "me_message"})
SLACKBOT = "USLACKBOT"  # Slack's own bot posts with this user id and no bot_id
TOP = 20  # rows of each "top" list
CHANNEL_USER_COLUMNS = ("user", "messages", "previous_messages", "words", "previous_words")
TOP_MESSAGES = 10
TOP_PER_CHANNEL = 5
# Channels whose rows are read ahead of the pass: the rows are streamed (a page of at most 5,000 rows per
# channel in memory at a time), so memory follows the pairs counted, not the week's messages.
ROWS_IN_FLIGHT = 4
_US_PER_HOUR = 3600 * US_PER_SECOND
# 1970-01-01 was a Thursday: weekday (Monday = 0) of UTC day d is (d + 3) % 7.
_EPOCH_WEEKDAY = 3


def fig(value: float | int | None, previous: float | int | None) -> dict[str, Any]:
    """A figure with the previous period's value and the change (None where either is undefined)."""
    change = None
    if value is not None and previous is not None:
        change = round(value - previous, 4) if isinstance(value, float) or isinstance(previous, float) \
            else value - previous
    return {"value": value, "previous": previous, "change": change}


def _int_fig(value: int, previous: int) -> dict[str, int]:
    """`fig` of two counts (the hot case: hundreds of thousands per report)."""
    return {"value": value, "previous": previous, "change": value - previous}


_QUARTER_US = 900 * US_PER_SECOND


class _Clock:
    """A user's local time: their IANA zone where Slack gave one (daylight saving applied), their fixed offset
    otherwise, UTC last. Offsets and their changes fall on quarter hours (every zone's offset and transition time
    is a multiple of 15 minutes), so a whole UTC quarter hour has one local weekday and hour."""

    __slots__ = ("zone", "offset_us", "offsets")

    def __init__(self, tz: str | None, tz_offset: int | None) -> None:
        self.zone: zoneinfo.ZoneInfo | None = None
        self.offset_us = (tz_offset or 0) * US_PER_SECOND
        self.offsets: dict[int, int] = {}  # quarter hour -> offset µs
        if tz:
            try:
                self.zone = zoneinfo.ZoneInfo(tz)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                self.zone = None

    def weekday_hour(self, ts: int) -> tuple[int, int]:
        offset = self.offset_us
        if self.zone is not None:
            quarter = ts // _QUARTER_US
            offset = self.offsets.get(quarter)
            if offset is None:
                at = dt.datetime.fromtimestamp(quarter * 900, self.zone)
                offset = self.offsets[quarter] = int(at.utcoffset().total_seconds()) * US_PER_SECOND
        t = ts + offset
        return (t // US_PER_DAY + _EPOCH_WEEKDAY) % 7, (t % US_PER_DAY) // _US_PER_HOUR


_UTC = _Clock(None, 0)


@dataclasses.dataclass
class _Tally:
    """What one period's messages add up to. The pass over the rows only counts pairs (channel and author,
    reactor and author, author and mentioned user, ...); `derive` then adds them up per user, channel, emoji,
    time zone: per row, a few counter updates instead of a dozen."""

    channel_user_messages: Counter = dataclasses.field(default_factory=Counter)  # (channel, user)
    channel_user_words: Counter = dataclasses.field(default_factory=Counter)
    quarters: Counter = dataclasses.field(default_factory=Counter)  # (author's clock, UTC quarter hour)
    utc: list = dataclasses.field(default_factory=lambda: [0] * 168)  # weekday * 24 + hour
    local: list = dataclasses.field(default_factory=lambda: [0] * 168)
    channel_emoji: Counter = dataclasses.field(default_factory=Counter)  # (channel, emoji)
    reaction_pairs: Counter = dataclasses.field(default_factory=Counter)  # (reactor, author)
    mention_pairs: Counter = dataclasses.field(default_factory=Counter)  # (author, mentioned)
    replies_by: Counter = dataclasses.field(default_factory=Counter)
    threads_by: dict = dataclasses.field(default_factory=dict)  # user -> set of (channel, thread_ts)
    reply_pairs: Counter = dataclasses.field(default_factory=Counter)  # (replier, thread author)
    threads_started: int = 0
    most_reacted: list = dataclasses.field(default_factory=list)  # heap of (count, -ts, channel, user, msg_ts)
    most_replied: list = dataclasses.field(default_factory=list)
    # derived
    user_messages: Counter = dataclasses.field(default_factory=Counter)
    user_words: Counter = dataclasses.field(default_factory=Counter)
    channel_messages: Counter = dataclasses.field(default_factory=Counter)
    channel_words: Counter = dataclasses.field(default_factory=Counter)
    channel_users: dict = dataclasses.field(default_factory=dict)  # channel -> set of users
    tz_messages: Counter = dataclasses.field(default_factory=Counter)
    tz_posters: dict = dataclasses.field(default_factory=dict)  # tz -> set of users
    emoji: Counter = dataclasses.field(default_factory=Counter)
    reactions_given: Counter = dataclasses.field(default_factory=Counter)
    reactions_received: Counter = dataclasses.field(default_factory=Counter)
    reactors: set = dataclasses.field(default_factory=set)
    mentions_made: Counter = dataclasses.field(default_factory=Counter)
    mentions_received: Counter = dataclasses.field(default_factory=Counter)

    def derive(self, tz_of: dict[str, str], clocks: dict[str, _Clock]) -> None:
        for (clock, quarter), n in self.quarters.items():
            start = quarter * _QUARTER_US
            self.utc[((start // US_PER_DAY + _EPOCH_WEEKDAY) % 7) * 24 + (start % US_PER_DAY) // _US_PER_HOUR] += n
            weekday, hour = clocks[clock].weekday_hour(start)
            self.local[weekday * 24 + hour] += n
        for (channel, user), n in self.channel_user_messages.items():
            words = self.channel_user_words[(channel, user)]
            self.user_messages[user] += n
            self.user_words[user] += words
            self.channel_messages[channel] += n
            self.channel_words[channel] += words
            self.channel_users.setdefault(channel, set()).add(user)
        for user, n in self.user_messages.items():
            tz = tz_of.get(user, "unknown")
            self.tz_messages[tz] += n
            self.tz_posters.setdefault(tz, set()).add(user)
        for (_, emoji), n in self.channel_emoji.items():
            self.emoji[emoji] += n
        for (reactor, author), n in self.reaction_pairs.items():
            self.reactions_given[reactor] += n
            self.reactions_received[author] += n
            self.reactors.add(reactor)
        for (author, mentioned), n in self.mention_pairs.items():
            self.mentions_made[author] += n
            self.mentions_received[mentioned] += n

    @property
    def messages(self) -> int:
        return sum(self.user_messages.values())

    @property
    def words(self) -> int:
        return sum(self.user_words.values())

    @property
    def utc_matrix(self) -> list[list[int]]:
        return [self.utc[d * 24:(d + 1) * 24] for d in range(7)]

    @property
    def local_matrix(self) -> list[list[int]]:
        return [self.local[d * 24:(d + 1) * 24] for d in range(7)]


def _keep_top(heap: list, item: tuple) -> None:
    if len(heap) < TOP_MESSAGES:
        heapq.heappush(heap, item)
    elif item > heap[0]:
        heapq.heapreplace(heap, item)


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What a report is computed from, read once: the rows of both periods and the workspace's metadata."""

    team_id: str
    period: Period
    channel_names: dict[str, str]  # reported channel id -> current name
    chain_head: dict[str, str]  # every channel id read -> the reported (newest) id of its chain
    rows: Iterable[tuple[str, Any]]  # (channel id, slack_messages row) of both periods
    users: list[Any]  # slack_users rows
    members: dict[str, list[tuple[int, int, str]]]  # reported channel -> (observed_at, members, source)


def read_inputs(db: Database, team_id: str, period: Period, *, include_private: bool = False) -> Inputs:
    """The bounded reads of a report: channel index, day listings, the listed channel days, users, members."""
    index = {r.channel_id: r for r in channels.every_indexed(db, team_id)}
    chain_head: dict[str, str] = {}
    names: dict[str, str] = {}
    for channel_id in index:
        head, hops = channel_id, 0
        while index.get(head) is not None and index[head].next_channel_id and hops < channels.MAX_ID_CHAIN:
            head, hops = index[head].next_channel_id, hops + 1
        chain_head[channel_id] = head
    for channel_id, head in chain_head.items():
        row = index.get(head)
        # The name and visibility of the newest id, else of the newest older id that has them.
        name = row.name if row is not None else None
        visibility = row.visibility if row is not None else None
        if name is None or visibility is None:
            for older in _older_ids(index, head):
                name = name or index[older].name
                visibility = visibility or index[older].visibility
        if visibility == "private" and not include_private:
            chain_head[channel_id] = ""
            continue
        names[head] = name or head
    reported = [c for c, head in chain_head.items() if head]
    first, last = period.previous.first_day, period.first_day + period.days - 1
    listings = [(c, messages.start_days_between(db, team_id, c, first, last)) for c in reported]
    channel_days = [(c, days) for c, future in listings if (days := [r.day for r in future.result()])]
    # Each channel's readings in the window, and its latest reading before it (the count in force when the
    # window opened): two bounded reads of the member log, whose partition grows with every history run.
    member_futures = {head: (channels.start_member_counts(db, team_id, head, since=period.previous.lower_us,
                                                          until=period.upper_us),
                             channels.start_member_counts(db, team_id, head, since=0,
                                                          until=period.previous.lower_us, limit=1))
                      for head in sorted(set(names))}
    members = {head: [(r.observed_at, r.members, r.source) for f in pair for r in f.result()]
               for head, pair in member_futures.items()}
    return Inputs(team_id=team_id, period=period, channel_names=names, chain_head=chain_head,
                  rows=messages.report_rows(db, team_id, channel_days, in_flight=ROWS_IN_FLIGHT),
                  users=users.every_user(db, team_id),
                  members=members)


def _older_ids(index: dict[str, Any], head: str) -> list[str]:
    out, seen = [], {head}
    current = index[head].prev_channel_id if head in index else None
    while current and current in index and current not in seen:
        out.append(current)
        seen.add(current)
        current = index[current].prev_channel_id
    return out


def compute(inputs: Inputs) -> dict[str, Any]:
    """The report document (docs/slack-reports.md lists every field and how it is counted)."""
    # Counting builds millions of small objects that all stay alive until the document is done: the cyclic
    # garbage collector would rescan them again and again (half the run time at 400k rows) and find nothing.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _compute(inputs)
    finally:
        if enabled:
            gc.enable()


def _compute(inputs: Inputs) -> dict[str, Any]:
    started = time.perf_counter()
    period, previous = inputs.period, inputs.period.previous
    # Messages are counted per (clock, quarter hour): weekday and hour, in UTC and in the author's local time,
    # are worked out once per quarter hour of each clock after the pass, not once per message.
    clocks: dict[str, _Clock] = {"": _UTC}
    clock_of: dict[str, str] = {}
    tz_of: dict[str, str] = {}
    for u in inputs.users:
        clock = _Clock(u.tz, u.tz_offset)
        key = u.tz if clock.zone is not None else f"{clock.offset_us}" if clock.offset_us else ""
        clocks.setdefault(key, clock)
        clock_of[u.user_id] = key
        tz_of[u.user_id] = u.tz or "unknown"
    tallies = {"current": _Tally(), "previous": _Tally()}
    head_author: dict[tuple[str, int], str] = {}
    unresolved: list[tuple[_Tally, str, str, int]] = []  # (period, replier, channel, thread_ts)
    lo, mid, hi = previous.lower_us, period.lower_us, period.upper_us
    rows_read = 0
    cur, prev = tallies["current"], tallies["previous"]
    for channel_id, row in inputs.rows:
        rows_read += 1
        channel = inputs.chain_head.get(channel_id) or ""
        ts = row.ts
        if not channel or row.msg_ts is None or not lo <= ts < hi:
            continue
        user = row.user_id
        thread_ts = row.thread_ts
        if user is not None and thread_ts == ts:
            head_author[(channel, ts)] = user
        if (row.deleted or user is None or row.bot_id is not None or row.subtype not in COUNTED_SUBTYPES
                or user == SLACKBOT):
            continue
        t = cur if ts >= mid else prev
        key = (channel, user)
        t.channel_user_messages[key] += 1
        t.channel_user_words[key] += row.word_count or 0
        t.quarters[(clock_of.get(user, ""), ts // _QUARTER_US)] += 1
        reactions = row.reactions
        if reactions:
            pairs, by_channel = t.reaction_pairs, t.channel_emoji
            for emoji, reactor in reactions:
                by_channel[(channel, emoji)] += 1
                pairs[(reactor, user)] += 1
            _keep_top(t.most_reacted, (len(reactions), -ts, channel, user, row.msg_ts))
        if row.mentions:
            for mentioned in row.mentions:
                t.mention_pairs[(user, mentioned)] += 1
        if thread_ts is not None:
            if thread_ts != ts:
                t.replies_by[user] += 1
                t.threads_by.setdefault(user, set()).add((channel, thread_ts))
                if row.parent_user_id:
                    t.reply_pairs[(user, row.parent_user_id)] += 1
                else:
                    unresolved.append((t, user, channel, thread_ts))
            else:
                t.threads_started += 1
                if row.reply_count:
                    _keep_top(t.most_replied, (row.reply_count, -ts, channel, user, row.msg_ts))
    for t, user, channel, thread_ts in unresolved:
        author = head_author.get((channel, thread_ts))
        if author is not None:
            t.reply_pairs[(user, author)] += 1
    cur.derive(tz_of, clocks)
    prev.derive(tz_of, clocks)
    doc = _document(inputs, tallies["current"], tallies["previous"])
    doc["stats"] = {"rows_read": rows_read, "compute_seconds": round(time.perf_counter() - started, 3)}
    return doc


def _top(current: Counter, previous: Counter, n: int = TOP) -> list[tuple[Any, dict[str, Any]]]:
    """The n largest of `current` (ties by key), each with its figure against `previous`."""
    keys = heapq.nsmallest(n, current, key=lambda k: (-current[k], k))
    return [(k, _int_fig(current[k], previous.get(k, 0))) for k in keys]


def _ranks(counts: Counter, words: Counter) -> list[str]:
    return sorted(counts, key=lambda u: (-counts[u], -words[u], u))


def _median(values: list[int]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _average(total: int, n: int) -> float:
    return round(total / n, 2) if n else 0.0


def _users_for_half(ordered: list[str], counts: Counter, total: int) -> int:
    running = 0
    for i, user in enumerate(ordered, 1):
        running += counts[user]
        if 2 * running >= total:
            return i
    return 0


def _share(part: int, total: int) -> float:
    return round(part / total, 4) if total else 0.0


def _user_figures(cur: _Tally, prev: _Tally) -> dict[str, Any]:
    total, prev_total = cur.messages, prev.messages
    order, prev_order = _ranks(cur.user_messages, cur.user_words), _ranks(prev.user_messages, prev.user_words)
    prev_rank = {u: i for i, u in enumerate(prev_order, 1)}
    rows, running = [], 0
    for rank, user in enumerate(order, 1):
        running += cur.user_messages[user]
        rows.append({
            "user": user, "messages": fig(cur.user_messages[user], prev.user_messages.get(user, 0)),
            "words": fig(cur.user_words[user], prev.user_words.get(user, 0)),
            "rank": fig(rank, prev_rank.get(user)),
            "share": fig(_share(cur.user_messages[user], total), _share(prev.user_messages.get(user, 0), prev_total)),
            "cumulative_share": _share(running, total)})
    for user in prev_order:
        if user not in cur.user_messages:
            rows.append({"user": user, "messages": fig(0, prev.user_messages[user]),
                         "words": fig(0, prev.user_words[user]), "rank": fig(None, prev_rank[user]),
                         "share": fig(0.0, _share(prev.user_messages[user], prev_total)), "cumulative_share": None})

    def top10(order: list[str], counts: Counter, total: int) -> float:
        return _share(sum(counts[u] for u in order[:10]), total)

    return {
        "rows": rows,
        "users_for_half": fig(_users_for_half(order, cur.user_messages, total),
                              _users_for_half(prev_order, prev.user_messages, prev_total)),
        "top10_share": fig(top10(order, cur.user_messages, total), top10(prev_order, prev.user_messages, prev_total)),
        "messages_per_poster": {
            "average": fig(_average(total, len(order)), _average(prev_total, len(prev_order))),
            "median": fig(_median(list(cur.user_messages.values())), _median(list(prev.user_messages.values())))},
        "words_per_poster": {
            "average": fig(_average(cur.words, len(order)), _average(prev.words, len(prev_order))),
            "median": fig(_median([cur.user_words[u] for u in order]),
                          _median([prev.user_words[u] for u in prev_order]))},
    }


def _channel_figures(cur: _Tally, prev: _Tally) -> list[dict[str, Any]]:
    keys = sorted(set(cur.channel_messages) | set(prev.channel_messages),
                  key=lambda c: (-cur.channel_messages.get(c, 0), -prev.channel_messages.get(c, 0), c))
    out = []
    for channel in keys:
        posters = cur.channel_users.get(channel, set()) | prev.channel_users.get(channel, set())
        per_user = sorted(posters, key=lambda u: (-cur.channel_user_messages.get((channel, u), 0), u))
        out.append({
            "channel": channel,
            "messages": fig(cur.channel_messages.get(channel, 0), prev.channel_messages.get(channel, 0)),
            "words": fig(cur.channel_words.get(channel, 0), prev.channel_words.get(channel, 0)),
            # A table, not a list of figures: a workspace has one row per (channel, poster), 240k of them at
            # 200,000 messages a week, and figures would make the stored report four times as large.
            "users": [[u, cur.channel_user_messages.get((channel, u), 0),
                       prev.channel_user_messages.get((channel, u), 0),
                       cur.channel_user_words.get((channel, u), 0),
                       prev.channel_user_words.get((channel, u), 0)] for u in per_user]})
    return out


def _activity(cur: _Tally, prev: _Tally) -> dict[str, Any]:
    def weekdays(m: list[list[int]]) -> list[int]:
        return [sum(row) for row in m]

    def hours(m: list[list[int]], days: range = range(7)) -> list[int]:
        return [sum(m[d][h] for d in days) for h in range(24)]

    def figs(a: list, b: list) -> list[dict[str, Any]]:
        return [fig(x, y) for x, y in zip(a, b, strict=True)]

    workdays = range(5)
    cur_utc, prev_utc = cur.utc_matrix, prev.utc_matrix
    cur_local, prev_local = cur.local_matrix, prev.local_matrix
    cur_wd, prev_wd = weekdays(cur_utc), weekdays(prev_utc)
    cur_total, prev_total = sum(cur_wd), sum(prev_wd)
    tzs = sorted(set(cur.tz_messages) | set(prev.tz_messages),
                 key=lambda z: (-cur.tz_messages.get(z, 0), z))
    return {
        "utc_weekday_hour": {"value": cur_utc, "previous": prev_utc},
        "utc_weekday": figs(cur_wd, prev_wd),
        "utc_hour": figs(hours(cur_utc), hours(prev_utc)),
        "weekday_hours_utc": figs(hours(cur_utc, workdays), hours(prev_utc, workdays)),
        "local_weekday": figs(weekdays(cur_local), weekdays(prev_local)),
        "local_hour": figs(hours(cur_local), hours(prev_local)),
        "weekday_hours_local": figs(hours(cur_local, workdays), hours(prev_local, workdays)),
        "weekday_share": figs([_share(n, cur_total) for n in cur_wd], [_share(n, prev_total) for n in prev_wd]),
        "workday_share": fig(_share(sum(cur_wd[:5]), cur_total), _share(sum(prev_wd[:5]), prev_total)),
        "timezones": [{"tz": z, "messages": fig(cur.tz_messages.get(z, 0), prev.tz_messages.get(z, 0)),
                       "posters": fig(len(cur.tz_posters.get(z, ())), len(prev.tz_posters.get(z, ())))}
                      for z in tzs],
    }


def _reactions_by_channel(cur: _Tally, prev: _Tally) -> list[dict[str, Any]]:
    per_channel: dict[str, list[str]] = {}
    for channel, emoji in cur.channel_emoji:
        per_channel.setdefault(channel, []).append(emoji)
    return [{"channel": c, "top": [
        {"emoji": e, "count": fig(cur.channel_emoji[(c, e)], prev.channel_emoji.get((c, e), 0))}
        for e in sorted(per_channel[c], key=lambda e: (-cur.channel_emoji[(c, e)], e))[:TOP_PER_CHANNEL]]}
        for c in sorted(per_channel)]


def _message_refs(team_id: str, heap: list, label: str) -> list[dict[str, Any]]:
    out = []
    for count, neg_ts, channel, user, msg_ts in sorted(heap, key=lambda x: (-x[0], -x[1], x[2])):
        out.append({"channel": channel, "ts": msg_ts, "user": user, label: count,
                    "ref": f"/slack/teams/{team_id}/channels/{channel}/messages/{msg_ts}",
                    "permalink": f"https://slack.com/archives/{channel}/p{msg_ts.replace('.', '')}"})
        del neg_ts
    return out


def _seen_before(u: Any, t: int) -> bool:
    """First seen before `t`: by their profile, or (known only from their posts) by their first post."""
    seen = u.first_seen if u.first_seen is not None else u.first_post_ts
    return seen is not None and seen < t


def _is_person(u: Any) -> bool:
    return not (u.deleted or u.is_bot or u.is_app_user or u.user_id == SLACKBOT)


def _document(inputs: Inputs, cur: _Tally, prev: _Tally) -> dict[str, Any]:
    period, previous, team = inputs.period, inputs.period.previous, inputs.team_id
    all_users = fig(sum(1 for u in inputs.users if _is_person(u) and _seen_before(u, period.upper_us)),
                    sum(1 for u in inputs.users if _is_person(u) and _seen_before(u, previous.upper_us)))

    def within(t: int | None, p: Period) -> bool:
        return t is not None and p.lower_us <= t < p.upper_us

    new_users = sorted((u for u in inputs.users if within(u.first_seen, period)),
                       key=lambda u: (u.first_seen, u.user_id))
    first_posts = sorted((u for u in inputs.users if within(u.first_post_ts, period)),
                         key=lambda u: (u.first_post_ts, u.user_id))
    members = []
    for channel in sorted(inputs.members):
        log = sorted(inputs.members[channel])
        if not log:
            continue
        last_cur = next((m for t, m, _ in reversed(log) if t < period.upper_us), None)
        last_prev = next((m for t, m, _ in reversed(log) if t < previous.upper_us), None)
        members.append({"channel": channel, "members": fig(last_cur, last_prev),
                        "observations": [{"at": us_to_ts(t), "members": m, "source": s} for t, m, s in log
                                         if t >= previous.lower_us]})
    doc: dict[str, Any] = {
        "team_id": team, "report_id": period.report_id, "period": period.to_json(), "previous": previous.to_json(),
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "totals": {
            "messages": fig(cur.messages, prev.messages), "words": fig(cur.words, prev.words),
            "posters": fig(len(cur.user_messages), len(prev.user_messages)),
            "active_users": fig(len(set(cur.user_messages) | cur.reactors),
                                len(set(prev.user_messages) | prev.reactors)),
            "all_users": all_users,
            "channels": fig(len(cur.channel_messages), len(prev.channel_messages)),
            "reactions": fig(sum(cur.emoji.values()), sum(prev.emoji.values())),
            "mentions": fig(sum(cur.mentions_made.values()), sum(prev.mentions_made.values())),
            "threads": fig(cur.threads_started, prev.threads_started),
            "replies": fig(sum(cur.replies_by.values()), sum(prev.replies_by.values())),
        },
        "users": _user_figures(cur, prev),
        "channels": _channel_figures(cur, prev),
        "channel_user_columns": list(CHANNEL_USER_COLUMNS),
        "activity": _activity(cur, prev),
        "reactions": {
            "top": [{"emoji": e, "count": f} for e, f in _top(cur.emoji, prev.emoji)],
            "by_channel": _reactions_by_channel(cur, prev),
            "given": [{"user": u, "count": f} for u, f in _top(cur.reactions_given, prev.reactions_given)],
            "received": [{"user": u, "count": f} for u, f in _top(cur.reactions_received, prev.reactions_received)],
            "pairs": [{"from": a, "to": b, "count": f} for (a, b), f in _top(cur.reaction_pairs, prev.reaction_pairs)],
        },
        "mentions": {
            "made": [{"user": u, "count": f} for u, f in _top(cur.mentions_made, prev.mentions_made)],
            "received": [{"user": u, "count": f} for u, f in _top(cur.mentions_received, prev.mentions_received)],
        },
        "threads": {
            "responders": [{"user": u, "replies": f,
                            "threads": fig(len(cur.threads_by.get(u, ())), len(prev.threads_by.get(u, ())))}
                           for u, f in _top(cur.replies_by, prev.replies_by)],
            "pairs": [{"from": a, "to": b, "count": f} for (a, b), f in _top(cur.reply_pairs, prev.reply_pairs)],
        },
        "top_messages": {
            "most_reacted": _message_refs(team, cur.most_reacted, "reactions"),
            "most_replied": _message_refs(team, cur.most_replied, "replies"),
        },
        "new_users": {"count": fig(len(new_users), sum(1 for u in inputs.users if within(u.first_seen, previous))),
                      "users": [{"user": u.user_id, "first_seen": us_to_ts(u.first_seen)} for u in new_users]},
        "first_posts": {"count": fig(len(first_posts),
                                     sum(1 for u in inputs.users if within(u.first_post_ts, previous))),
                        "posts": [{"user": u.user_id, "channel": u.first_post_channel,
                                   "ts": us_to_ts(u.first_post_ts)} for u in first_posts]},
        "members": members,
    }
    doc["names"] = _names(inputs, doc)
    return doc


def _names(inputs: Inputs, doc: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Display names of every user and channel the document mentions (ids stay the keys everywhere)."""
    people = {u.user_id: (u.display_name or u.real_name or u.name or u.user_id) for u in inputs.users}
    # Every poster of either period is in users.rows (so every user of channels[].users is too); the other
    # sections are short lists, walked whole.
    user_ids: set[str] = {r["user"] for r in doc["users"]["rows"]}
    channel_ids: set[str] = {c["channel"] for c in doc["channels"]} | {m["channel"] for m in doc["members"]}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("user", "from", "to") and isinstance(item, str):
                    user_ids.add(item)
                elif key == "channel" and isinstance(item, str):
                    channel_ids.add(item)
                else:
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk([doc[k] for k in ("reactions", "mentions", "threads", "top_messages", "new_users", "first_posts")])
    return {"users": {u: people.get(u, u) for u in sorted(user_ids)},
            "channels": {c: inputs.channel_names.get(c, c) for c in sorted(channel_ids)}}
