"""Self-check of the fake Slack Web API through slack_sdk's real WebClient (no Cassandra needed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import FixedValueRetryIntervalCalculator
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from tests.fakes.slack_web_api import DEFAULT_TOKEN, FakeSlackWebApi


@pytest.fixture
def fake() -> Iterator[FakeSlackWebApi]:
    with FakeSlackWebApi() as api:
        api.add_channel("C1", "general", topic="hello")
        api.add_channel("C2", "secret", private=True)
        api.add_channel("C3", "hidden", private=True, member=False)
        api.add_channel("C4", "old", archived=True)
        api.add_user("U1", "ann")
        api.add_user("U2", "bob", profile={"display_name": "Bobby"})
        api.set_members("C1", ["U1", "U2"])
        yield api


def client(fake: FakeSlackWebApi, token: str = DEFAULT_TOKEN, retries: int = 2) -> WebClient:
    # a short fixed back-off keeps the connection-error retries fast
    return WebClient(token=token, base_url=fake.base_url, retry_handlers=[
        ConnectionErrorRetryHandler(max_retry_count=retries,
                                    interval_calculator=FixedValueRetryIntervalCalculator(0.05)),
        RateLimitErrorRetryHandler(max_retry_count=retries)])


def test_history_pages_newest_first_with_oldest(fake: FakeSlackWebApi) -> None:
    tops = [fake.post("C1", "U1", f"m{i}") for i in range(7)]
    fake.post("C1", "U2", "hidden reply", thread_ts=tops[2])
    seen, cursor, pages = [], None, 0
    while True:
        page = client(fake).conversations_history(channel="C1", limit=3, cursor=cursor)
        seen += [m["ts"] for m in page["messages"]]
        pages += 1
        cursor = page["response_metadata"]["next_cursor"]
        assert page["has_more"] == bool(cursor)
        if not cursor:
            break
    assert (seen, pages) == (tops[::-1], 3)
    newer = client(fake).conversations_history(channel="C1", oldest=tops[4])
    assert [m["ts"] for m in newer["messages"]] == tops[:4:-1]
    both = client(fake).conversations_history(channel="C1", oldest=tops[4], latest=tops[6], inclusive=True)
    assert [m["text"] for m in both["messages"]] == ["m6", "m5", "m4"]
    with pytest.raises(SlackApiError) as bad:
        client(fake).conversations_history(channel="C1", cursor="not*base64")
    assert bad.value.response["error"] == "invalid_cursor"


def test_replies_parent_first_on_every_page(fake: FakeSlackWebApi) -> None:
    parent = fake.post("C1", "U1", "question")
    replies = [fake.post("C1", ["U2", "U1"][i % 2], f"r{i}", thread_ts=parent) for i in range(6)]
    # iterating a SlackResponse yields the same object, its data replaced per page: copy each page's messages
    pages = [{"messages": list(p["messages"])} for p in client(fake).conversations_replies(
        channel="C1", ts=parent, limit=2)]
    assert len(pages) == 3
    assert all(p["messages"][0]["ts"] == parent for p in pages)
    assert [m["ts"] for p in pages for m in p["messages"][1:]] == replies
    head = pages[0]["messages"][0]
    assert (head["thread_ts"], head["reply_count"], head["reply_users"], head["latest_reply"]) == (
        parent, 6, ["U2", "U1"], replies[-1])
    assert pages[0]["messages"][1]["parent_user_id"] == "U1"
    with pytest.raises(SlackApiError) as missing:
        client(fake).conversations_replies(channel="C1", ts="1.000001")
    assert missing.value.response["error"] == "thread_not_found"


def test_tombstone_edit_reactions_and_broadcast(fake: FakeSlackWebApi) -> None:
    parent = fake.post("C1", "U1", "root")
    reply = fake.post("C1", "U2", "answer", thread_ts=parent)
    fake.post("C1", "U2", "also here", thread_ts=parent, broadcast=True)
    fake.edit("C1", reply, "answer!")
    fake.react("C1", reply, "tada", "U1")
    fake.react("C1", reply, "eyes", "U2")
    fake.unreact("C1", reply, "tada", "U1")
    fake.delete("C1", parent)
    history = client(fake).conversations_history(channel="C1")["messages"]
    assert [m.get("subtype") for m in history] == ["thread_broadcast", "tombstone"]
    assert history[1]["hidden"] and history[1]["reply_count"] == 2
    thread = client(fake).conversations_replies(channel="C1", ts=parent)["messages"]
    assert thread[0]["text"] == "This message was deleted."
    assert thread[1]["edited"]["user"] == "U2" and thread[1]["reactions"] == [
        {"name": "eyes", "users": ["U2"], "count": 1}]
    for ts in [m["ts"] for m in thread[1:]]:
        fake.delete("C1", ts)
    assert fake.messages("C1") == []  # the tombstone went with its last reply


def test_lists_members_and_users(fake: FakeSlackWebApi) -> None:
    web = client(fake)
    public = web.conversations_list(exclude_archived=True)["channels"]
    assert [c["id"] for c in public] == ["C1"] and public[0]["topic"]["value"] == "hello"
    both = web.conversations_list(types="public_channel,private_channel", limit=2)
    assert [c["id"] for c in both["channels"]] == ["C1", "C2"] and both["response_metadata"]["next_cursor"]
    assert web.conversations_info(channel="C1")["channel"]["num_members"] == 2
    first = web.conversations_members(channel="C1", limit=1)
    rest = web.conversations_members(channel="C1", cursor=first["response_metadata"]["next_cursor"])
    assert first["members"] + rest["members"] == ["U1", "U2"] and rest["response_metadata"]["next_cursor"] == ""
    assert [u["profile"]["display_name"] for u in web.users_list()["members"]] == ["ann", "Bobby"]
    with pytest.raises(SlackApiError) as hidden:
        web.conversations_history(channel="C3")
    assert hidden.value.response["error"] == "not_in_channel"
    with pytest.raises(SlackApiError) as unknown:
        web.api_call("chat.scheduleMessage")  # not spoken by the stand-in
    assert unknown.value.response["error"] == "unknown_method"


def test_auth_errors_and_missing_scope(fake: FakeSlackWebApi) -> None:
    with pytest.raises(SlackApiError) as bad:
        client(fake, token="xoxb-wrong").auth_test()
    assert bad.value.response["error"] == "invalid_auth"
    assert client(fake).auth_test()["team_id"] == "T0FAKE"
    fake.tokens["xoxb-narrow"] = {"channels:read"}
    with pytest.raises(SlackApiError) as scope:
        client(fake, token="xoxb-narrow").conversations_history(channel="C1")
    assert scope.value.response.data["needed"] == "channels:history"
    assert scope.value.response.data["provided"] == "channels:read"


def test_forced_429_is_retried_after_retry_after(fake: FakeSlackWebApi) -> None:
    fake.force_429_every = 2
    web = client(fake)
    web.auth_test()
    web.auth_test()  # the 2nd request is refused, the handler sleeps Retry-After (+ up to 1 s jitter) and retries
    log = list(fake.requests)
    assert [s for _, _, s in log] == [200, 429, 200]
    assert log[2][0] - log[1][0] >= fake.retry_after_seconds


def test_sliding_window_rate_limit(fake: FakeSlackWebApi) -> None:
    fake.rate_per_minute["conversations.history"] = 2
    fake.window_seconds = 1.0
    plain = WebClient(token=DEFAULT_TOKEN, base_url=fake.base_url)
    plain.conversations_history(channel="C1")
    plain.conversations_history(channel="C1")
    with pytest.raises(SlackApiError) as limited:
        plain.conversations_history(channel="C1")
    assert limited.value.response.status_code == 429 and limited.value.response.headers["Retry-After"] == "1"
    client(fake).conversations_history(channel="C1")  # waits out the window, then succeeds
    assert fake.count("conversations.history", 429) == 2 and fake.count("conversations.history", 200) == 3
    assert fake.count(status=200) == fake.count() - 2


def test_dropped_connection_and_server_error(fake: FakeSlackWebApi) -> None:
    fake.drop_next("auth.test", 2)
    assert client(fake).auth_test()["ok"]
    assert [s for _, _, s in fake.requests] == [0, 0, 200]
    fake.fail_next("auth.test", 1, status=503)
    with pytest.raises(SlackApiError) as failed:
        client(fake).auth_test()
    assert failed.value.response.status_code == 503
