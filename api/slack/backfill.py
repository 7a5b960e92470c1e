"""Web API backfill: a workspace's history through conversations.history / .replies, users.list,
conversations.list and conversations.members, into the tables live ingest fills (seed 000's fetcher).

Owner of slack_backfill_cursors. Per channel, the cursor is the newest ts fully fetched; a run fetches from
`refetch_days` before it (never earlier than `max_age_days` ago; 0 = everything), so recent edits, deletes,
reactions and replies are seen again. A run in progress keeps its window, the Slack cursor of its next page
and where that page's range ends: a killed run resumes at the page it stopped at, and the cursor only moves
once a page (with every thread it holds) is stored. Every write is the idempotent `ingest.history_rows`, so a
page stored twice changes nothing.

What a page observes at the run's start time `observed`: the messages of its range that Slack still has.
A stored message of that range that Slack no longer returns was deleted (flag written at `observed`; when is
not known), a reaction stored but no longer listed was removed (removed at `observed`: a live add after it
still wins), replies of a thread likewise.

Rate limits: slack-sdk's RateLimitErrorRetryHandler sleeps Retry-After (never hammers); `RateBudget` stops
the run (exit code) when the total wait would pass the configured budget.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from api.db import Database, Params, Statement
from api.slack import ingest, messages, users
from api.slack.payloads import BadEvent, history_message
from api.slack.timeutil import US_PER_DAY, us_to_ts

TABLES = frozenset({"slack_backfill_cursors"})

log = structlog.get_logger("chronicle.slack.backfill")

SELECT_CURSOR = Statement(
    "SELECT channel_id, newest_ts, run_oldest, run_latest, run_started, page_cursor, page_upper, run_newest, "
    "pages, messages FROM slack_backfill_cursors WHERE team_id = ? AND channel_id = ?")
START_RUN = Statement(
    "UPDATE slack_backfill_cursors SET run_oldest = ?, run_latest = ?, run_started = ?, page_cursor = '', "
    "page_upper = ?, run_newest = 0, pages = 0, messages = 0 WHERE team_id = ? AND channel_id = ?")
PAGE_STORED = Statement(
    "UPDATE slack_backfill_cursors SET page_cursor = ?, page_upper = ?, run_newest = ?, pages = ?, messages = ? "
    "WHERE team_id = ? AND channel_id = ?")
FINISH_RUN = Statement(
    "UPDATE slack_backfill_cursors SET newest_ts = ?, run_latest = 0, page_cursor = '', finished_at = ? "
    "WHERE team_id = ? AND channel_id = ?")

AUTH_ERRORS = {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
               "no_permission", "not_allowed_token_type"}


class BackfillError(Exception):
    """The run cannot go on; `kind` names why (bad_token, missing_scope, rate_limited, slack_error)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclasses.dataclass(frozen=True)
class Options:
    refetch_days: int = 7
    max_age_days: int = 21  # 0 = everything
    include_private: bool = False
    channels: frozenset[str] | None = None  # ids or names; None = every channel
    dry_run: bool = False
    page_size: int = 200
    rate_wait_budget: float = 900.0  # seconds of Retry-After waiting allowed in one run
    now: float | None = None  # the run's time (tests); default: the clock


class RateBudget(RateLimitErrorRetryHandler):
    """Honour Retry-After (slack-sdk sleeps it), but give up once the run has waited `budget` seconds."""

    def __init__(self, budget: float) -> None:
        super().__init__(max_retry_count=10_000)
        self.budget, self.waited, self.limited = budget, 0.0, 0

    def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
        if not super()._can_retry(state=state, request=request, response=response, error=error):
            return False
        self.limited += 1
        after = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), ["1"])
        wait = float(after[0] if isinstance(after, list) else after) + 0.5
        if self.waited + wait > self.budget:
            return False
        self.waited += wait
        return True


@dataclasses.dataclass
class ChannelResult:
    channel_id: str
    name: str
    pages: int = 0
    messages: int = 0
    replies: int = 0
    deleted_seen: int = 0
    reactions_removed: int = 0
    skipped: int = 0
    resumed: bool = False
    window: tuple[str, str] = ("", "")


@dataclasses.dataclass
class Report:
    team_id: str
    dry_run: bool
    users: int = 0
    channels: list[ChannelResult] = dataclasses.field(default_factory=list)
    requests_rate_limited: int = 0
    rate_limit_wait_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Backfill:
    """One workspace's backfill run. `progress(kind, value)` reports work: ("channels", total) once,
    ("channel_start", name) as a channel begins, ("messages", n) as its pages are stored, ("channel", 1) when
    it is done."""

    def __init__(self, db: Database | None, team_id: str, token: str, options: Options = Options(), *,
                 base_url: str | None = None,
                 progress: Callable[[str, Any], None] | None = None) -> None:
        self.db, self.team_id, self.options = db, team_id, options
        self.rate = RateBudget(options.rate_wait_budget)
        kwargs = {"base_url": base_url} if base_url else {}
        self.client = WebClient(token=token, timeout=30, retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=5), self.rate], **kwargs)
        self.progress = progress or (lambda kind, n: None)
        self.observed = int((options.now if options.now is not None else time.time()) * 1_000_000)

    # -- Slack calls --------------------------------------------------------------------------------------

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        try:
            return self.client.api_call(method, params={k: v for k, v in params.items() if v is not None}).data
        except SlackApiError as exc:
            data = exc.response.data if isinstance(exc.response.data, dict) else {}
            error = data.get("error", "")
            if exc.response.status_code == 429 or error == "ratelimited":
                raise BackfillError("rate_limited", f"{method}: rate limited beyond the wait budget of "
                                    f"{self.options.rate_wait_budget:.0f} s") from None
            if error in AUTH_ERRORS:
                raise BackfillError("bad_token", f"{method}: the bot token was refused ({error})") from None
            if error == "missing_scope":
                raise BackfillError("missing_scope", f"{method}: the bot token lacks the scope "
                                    f"{data.get('needed', '?')} (has: {data.get('provided', '?')})") from None
            raise BackfillError("slack_error", f"{method}: {error or exc}") from None

    def _pages(self, method: str, key: str, **params: Any) -> Iterator[list[Any]]:
        cursor = None
        while True:
            data = self._call(method, cursor=cursor, **params)
            yield data.get(key) or []
            cursor = (data.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return

    # -- the run ------------------------------------------------------------------------------------------

    def run(self) -> Report:
        report = Report(team_id=self.team_id, dry_run=self.options.dry_run)
        auth = self._call("auth.test")
        if auth.get("team_id") and auth["team_id"] != self.team_id:
            raise BackfillError("bad_token", f"the token belongs to workspace {auth['team_id']}, not "
                                f"{self.team_id}")
        report.users = self._users()
        selected = self._channels()
        self.progress("channels", len(selected))
        for snap in selected:
            report.channels.append(self._channel(snap))
            self.progress("channel", 1)
        report.requests_rate_limited, report.rate_limit_wait_seconds = self.rate.limited, round(self.rate.waited, 1)
        return report

    def _users(self) -> int:
        n = 0
        for page in self._pages("users.list", "members", limit=200):
            for user in page:
                try:
                    profile = users.Profile.from_slack(self.team_id, user, observed_at=self.observed)
                except ValueError:
                    continue
                if not self.options.dry_run:
                    users.store_profile(self.db, profile, seen_at=min(self.observed, profile.updated), raw=user)
                n += 1
        return n

    def _channels(self) -> list[ingest.ChannelSnapshot]:
        types = "public_channel,private_channel" if self.options.include_private else "public_channel"
        wanted = self.options.channels
        out = []
        for page in self._pages("conversations.list", "channels", types=types, limit=200):
            for obj in page:
                try:
                    snap = ingest.ChannelSnapshot.parse(obj)
                except ValueError:
                    continue
                if snap.private and not self.options.include_private:
                    continue
                if wanted is not None and snap.channel_id not in wanted and snap.name not in wanted:
                    continue
                out.append(snap)
        return out

    def _channel(self, snap: ingest.ChannelSnapshot) -> ChannelResult:
        result = ChannelResult(channel_id=snap.channel_id, name=snap.name)
        self.progress("channel_start", snap.name)
        members = sum(len(p) for p in self._pages("conversations.members", "members", channel=snap.channel_id,
                                                    limit=500))
        snap = dataclasses.replace(snap, members=members)
        db, team, ch = self.db, self.team_id, snap.channel_id
        if not self.options.dry_run:
            ingest.store_channel_snapshot(db, team, snap, observed_at=self.observed, source="backfill")
        state = db.execute(SELECT_CURSOR, (team, ch)).one() if db is not None else None
        if state is not None and state.run_latest:
            oldest, latest, observed = state.run_oldest, state.run_latest, state.run_started
            cursor, upper = state.page_cursor or None, state.page_upper or latest
            result.pages, result.messages, result.resumed = state.pages or 0, state.messages or 0, True
        else:
            floor = self.observed - self.options.max_age_days * US_PER_DAY if self.options.max_age_days else 0
            newest = state.newest_ts if state is not None and state.newest_ts else 0
            oldest = max(newest - self.options.refetch_days * US_PER_DAY, floor, 0) if newest else max(floor, 0)
            latest = observed = self.observed
            cursor, upper = None, latest
            if not self.options.dry_run:
                db.execute(START_RUN, (oldest, latest, observed, upper, team, ch))
        result.window = (us_to_ts(oldest), us_to_ts(latest))
        newest_seen = max(state.newest_ts or 0, state.run_newest or 0) if state is not None else 0
        while True:
            data = self._call("conversations.history", channel=ch, oldest=us_to_ts(oldest),
                              latest=us_to_ts(latest), limit=self.options.page_size, cursor=cursor)
            page = data.get("messages") or []
            cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            more = bool(data.get("has_more")) and cursor is not None
            parsed = self._parse(ch, page, result)
            lower = min((hm.message.ts for hm in parsed), default=oldest) if more else oldest
            newest_seen = max([newest_seen, *(hm.message.ts for hm in parsed)])
            replies_before = result.replies
            writes = self._page_writes(ch, parsed, lower, upper, observed, result)
            if not self.options.dry_run:
                db.execute_many(writes, batch_size=20)
                for hm in parsed:
                    ingest.note_stored(db, hm.message)
            result.pages += 1
            result.messages += len(parsed)
            self.progress("messages", len(parsed) + result.replies - replies_before)
            upper = lower
            if not more:
                break
            if not self.options.dry_run:
                db.execute(PAGE_STORED, (cursor, upper, newest_seen, result.pages, result.messages, team, ch))
        if not self.options.dry_run:
            db.execute(FINISH_RUN, (newest_seen, int(time.time() * 1_000_000), team, ch))
        return result

    def _parse(self, channel_id: str, page: list[Any], result: ChannelResult) -> list[Any]:
        out = []
        for m in page:
            try:
                hm = history_message(self.team_id, channel_id, m)
            except BadEvent as exc:
                log.warning("backfill_message_skipped", channel=channel_id, reason=str(exc))
                result.skipped += 1
                continue
            if hm.hidden:
                result.skipped += 1
                continue
            out.append(hm)
        return out

    def _replies(self, channel_id: str, thread_ts: int, result: ChannelResult) -> list[Any]:
        out = []
        for page in self._pages("conversations.replies", "messages", channel=channel_id, ts=us_to_ts(thread_ts),
                                limit=self.options.page_size):
            out.extend(hm for hm in self._parse(channel_id, page, result) if hm.message.ts != thread_ts)
        result.replies += len(out)
        return out

    def _page_writes(self, channel_id: str, parsed: list[Any], lower: int, upper: int, observed: int,
                     result: ChannelResult) -> list[tuple[Statement, Params]]:
        """Rows of a page's messages and of their threads, plus what the page shows was deleted or removed
        among the stored messages of its range [lower, upper)."""
        db, team = self.db, self.team_id
        stored = {} if db is None else {
            r.ts: r for r in messages.stored_between(db, team, channel_id, lower, upper) if r.msg_ts is not None}
        seen: dict[int, Any] = {}
        threads = [hm.message.ts for hm in parsed if hm.message.thread_ts == hm.message.ts]
        threads += [ts for ts, r in stored.items() if r.thread_ts == ts and ts not in threads]
        for hm in parsed:
            seen[hm.message.ts] = hm
        # Replies of every thread whose parent Slack still shows (a deleted parent with replies left is shown as
        # a tombstone); a thread whose parent is gone altogether has no replies left either.
        thread_replies = {ts: self._replies(channel_id, ts, result) for ts in threads if ts in seen}
        writes: list[tuple[Statement, Params]] = []
        for hm in parsed:
            writes.extend(ingest.history_rows(db, hm, observed_at=observed))
        for replies in thread_replies.values():
            for hm in replies:
                seen[hm.message.ts] = hm
                writes.extend(ingest.history_rows(db, hm, observed_at=observed))
        if db is None:
            return writes
        # What the stored archive has and Slack no longer shows: top-level messages of the range, and replies
        # of the threads whose replies were fetched (or whose parent is gone).
        gone: list[tuple[int, int | None]] = [  # (ts, thread_ts of a reply)
            (ts, None) for ts, r in stored.items()
            if (r.thread_ts is None or r.thread_ts == ts) and ts not in seen and not r.deleted]
        for thread_ts in threads:
            fetched = {hm.message.ts for hm in thread_replies.get(thread_ts, ())}
            for reply in messages.start_reply_authors(db, team, channel_id, thread_ts).result():
                if reply.ts not in fetched and reply.ts not in seen:
                    gone.append((reply.ts, thread_ts))
        for ts, thread_ts in gone:
            writes.extend(messages.deleted_seen_writes(team, channel_id, ts, at=max(observed, ts),
                                                       thread_ts=thread_ts, db=db))
        result.deleted_seen += len(gone)
        for ts, hm in seen.items():
            row = stored.get(ts)
            if row is None or not row.reactions or hm.tombstone:
                continue
            removed = set(row.reactions) - hm.reactions
            if removed:
                writes.append(messages.reactions_write(team, channel_id, ts, removed, at=observed, added=False, db=db))
                result.reactions_removed += len(removed)
        return writes

