"""The archive's follower-network pages through Flask's test client: an account's counts and posts with the REST
API's paging cursor, the home timeline in both orders, the top-100 rankings with their moves and history chart,
the word search, the landing pages, bad input (always a page, never a 500) and escaping. What each page must show
comes from the brute-force Reference of the loaded files and the REST writes (tests/viewer/insights_data.py)."""

from __future__ import annotations

import pytest

from tests.viewer.html_tree import Element, parse
from tests.viewer.insights_data import ADDED_POSTS, HOSTILE_POST, NetworkData, build_network, chart_expectation

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
       "base-uri 'none'; form-action 'self'")
PAGE = 25


@pytest.fixture(scope="module")
def net(app, db, tmp_path_factory) -> NetworkData:
    return build_network(app.test_client(), db, tmp_path_factory.mktemp("network-pages"))


def page(client, path: str, status: int = 200) -> Element:
    r = client.get(path)
    assert r.status_code == status, (path, r.status_code, r.data[:400])
    assert r.mimetype == "text/html"
    assert r.headers["Content-Security-Policy"] == CSP and r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Cache-Control"] == "no-store"
    return parse(r.data)


def post_ids(tree: Element, list_id: str) -> list[int]:
    found = tree.find(id=list_id)
    return [int(li.get("data-post")) for li in found.find_all("li", class_="post")] if found else []


def test_account_page_shows_the_counts_and_the_posts_newest_first_a_page_at_a_time(client, net):
    ref, a = net.ref, net.author
    base = f"/archive/networks/{net.name}/accounts/{a}"
    tree = page(client, base)  # no sign-in: network reads are public
    assert tree.by_id("account-name").text() == ref.usernames[a]
    assert tree.by_id("count-followers").text() == f"{len(ref.followers(a)):,}"
    assert tree.by_id("count-follows").text() == f"{len(ref.follows(a)):,}"
    expected = ref.q1(a)
    assert len(expected) > PAGE + ADDED_POSTS // 2  # more than a page: paging is exercised
    assert tree.by_id("count-posts").text() == f"{len(expected):,}"
    assert post_ids(tree, "posts") == expected[:PAGE]
    assert tree.by_id("tab-home").get("href") == f"{base}/home"

    older = tree.by_id("older-posts").get("href")
    second = page(client, base + older)
    assert post_ids(second, "posts") == expected[PAGE:2 * PAGE]
    assert second.by_id("newest-posts").get("href") == base
    # The REST listing's cursor pages this page too (same scope, same position format), and the other way round.
    rest = client.get(f"/networks/{net.name}/accounts/{a}/posts?limit={PAGE}").json
    assert post_ids(page(client, f"{base}?cursor={rest['next_cursor']}"), "posts") == expected[PAGE:2 * PAGE]
    cursor = older.split("cursor=", 1)[1]
    assert [p["post_id"] for p in client.get(f"/networks/{net.name}/accounts/{a}/posts?limit={PAGE}&cursor="
                                             f"{cursor}").json["posts"]] == expected[PAGE:2 * PAGE]
    if len(expected) <= 2 * PAGE:
        assert second.find(id="older-posts") is None


def test_archived_text_is_escaped(client, net):
    tree = page(client, f"/archive/networks/{net.name}/accounts/{net.author}")
    hostile = tree.by_id(f"post-{net.hostile_post}")
    assert hostile.find(class_="post-text").text() == HOSTILE_POST
    assert hostile.find("script") is None and hostile.find("img") is None and hostile.find("b") is None
    assert [s.get("src") for s in tree.find_all("script")] == []  # these pages need no script at all
    raw = client.get(f"/archive/networks/{net.name}/accounts/{net.author}").data.decode()
    assert "<script>alert" not in raw and " style=" not in raw


@pytest.mark.parametrize("order", ["newest", "likes"])
def test_home_page_shows_the_home_timeline_in_either_order(client, net, order):
    ref, reader = net.ref, net.reader
    followers, follows, expected = ref.q4(reader, order, net.cap, PAGE)
    tree = page(client, f"/archive/networks/{net.name}/accounts/{reader}/home?order={order}")
    assert tree.by_id("count-followers").text() == f"{followers:,}" and tree.by_id("count-follows").text() == \
        f"{follows:,}"
    assert len(expected) == PAGE
    assert post_ids(tree, "home-posts") == expected
    assert tree.by_id(f"order-{order}").get("aria-current") == "page"
    other = "likes" if order == "newest" else "newest"
    assert tree.by_id(f"order-{other}").get("aria-current") is None
    assert tree.by_id(f"order-{other}").get("href") == f"?order={other}"
    likes = [int(li.get("data-likes")) for li in tree.by_id("home-posts").find_all("li", class_="post")]
    assert likes == [ref.like_count(p) for p in expected]
    authors = [li.find("a", class_="author").get("href") for li in tree.by_id("home-posts").find_all("li")
               if "post" in li.classes]
    assert authors == [f"/archive/networks/{net.name}/accounts/{ref.posts[p]['author_id']}" for p in expected]


def test_top_page_shows_both_rankings_their_moves_and_their_history(client, net):
    tree = page(client, f"/archive/networks/{net.name}/top")
    assert net.snapshots[-1] == {"accounts": net.ref.q2(100), "followers": net.ref.q3(100)}
    for kind in ("accounts", "followers"):
        latest, before = net.snapshots[-1][kind], net.snapshots[-2][kind]
        rows = tree.by_id(f"table-{kind}").find("tbody").find_all("tr")
        assert [(int(r.get("data-account")), int(r.get("data-value"))) for r in rows] == latest
        earlier = {a: i for i, (a, _) in enumerate(before)}
        for i, row in enumerate(rows):
            account = latest[i][0]
            move = row.find(class_="move").text().strip()
            if account not in earlier:
                assert move == "new"
            elif earlier[account] > i:
                assert move == f"▲ {earlier[account] - i}"
            elif earlier[account] < i:
                assert move == f"▼ {i - earlier[account]}"
            else:
                assert move == "="
        # The chart: the latest first ten, a point for each snapshot ranking the account, lines joining them.
        top10, points, lines = chart_expectation(net.snapshots, kind)
        chart = tree.by_id(f"chart-top-{kind}")
        drawn = [(p.get("data-key"), int(p.get("data-value"))) for p in chart.find_all("circle", class_="point")]
        assert sorted(drawn) == sorted(points) and len(points) > 2 * len(top10)  # three snapshots
        assert len(chart.find_all("polyline")) == lines
        legend = [li.find("a").get("href") for li in tree.by_id(f"legend-{kind}").find_all("li")]
        assert legend == [f"/archive/networks/{net.name}/accounts/{a}" for a in top10]
    # the unfollows between the last two snapshots moved the faller down: the table says by how much
    fallen = [a for a, _ in net.snapshots[-1]["accounts"]].index(net.faller)
    assert fallen > 2
    row = tree.by_id("table-accounts").find("tr", data_account=str(net.faller))
    assert row.find(class_="move").text().strip() == f"▼ {fallen - 2}"
    # the follows between the first two moved the climber up: its line rises by the 15 new followers
    values = [int(p.get("data-value")) for p in tree.by_id("chart-top-accounts").find_all("circle")
              if p.get("data-key") == str(net.climber)]
    assert len(values) == 3 and values[1] - values[0] == 15 and values[2] == values[1]


def test_word_search_shows_the_most_liked_posts_holding_every_word(client, net):
    ref = net.ref
    tree = page(client, f"/archive/networks/{net.name}/search?q={net.word.upper()}")
    expected = ref.q6([net.word])
    assert expected and post_ids(tree, "results") == expected
    assert tree.by_id("search-words").get("value") == net.word.upper()
    for li in tree.by_id("results").find_all("li", class_="post"):
        assert [m.text().casefold() for m in li.find_all("mark")][:1] == [net.word]  # the word is marked
    # Every word must be held: the hostile post is the only one with both words; its text stays text.
    tree = page(client, f"/archive/networks/{net.name}/search?q=zebraquux+bold")
    assert post_ids(tree, "results") == [net.hostile_post]
    text = tree.by_id(f"post-{net.hostile_post}").find(class_="post-text")
    assert text.text() == HOSTILE_POST and [m.text() for m in text.find_all("mark")] == ["zebraquux", "bold"]
    assert text.find("script") is None and text.find("b") is None
    tree = page(client, f"/archive/networks/{net.name}/search?q=%3Cscript%3E+zzzznotaword")
    assert tree.find(id="results") is None and tree.by_id("no-results") is not None
    assert page(client, f"/archive/networks/{net.name}/search?q=%21%21%21").by_id("no-words") is not None
    assert page(client, f"/archive/networks/{net.name}/search").find(id="no-results") is None  # just the form
    assert "at most" in page(client, f"/archive/networks/{net.name}/search?q={'a' * 201}", 400) \
        .by_id("error-message").text()


def test_landing_pages_open_networks_and_accounts(client, net):
    tree = page(client, "/archive/networks")
    assert tree.by_id("open-network").get("action") == "/archive/networks"
    r = client.get(f"/archive/networks?network={net.name}")
    assert r.status_code == 303 and r.headers["Location"] == f"/archive/networks/{net.name}"
    assert page(client, "/archive/networks?network=no/such%20name", 400).by_id("network-error") is not None

    tree = page(client, f"/archive/networks/{net.name}")
    shown = [int(li.get("data-account")) for li in tree.by_id("landing-top").find_all("li")]
    assert shown == [a for a, _ in net.ref.q2(10)]
    assert tree.by_id("top-link").get("href") == f"/archive/networks/{net.name}/top"
    r = client.get(f"/archive/networks/{net.name}/accounts?id=+{net.author}+")
    assert r.status_code == 303 and r.headers["Location"] == f"/archive/networks/{net.name}/accounts/{net.author}"
    # a network without rankings: the landing page says how to make them, the top page is a 404
    assert page(client, "/archive/networks/no-such-network").by_id("no-rankings") is not None


@pytest.mark.parametrize("path, status, says", [
    ("/archive/networks/bad%20name", 404, "not a network name"),
    ("/archive/networks/{n}/accounts/abc", 404, "not an account id"),
    ("/archive/networks/{n}/accounts/-5", 404, "not an account id"),
    ("/archive/networks/{n}/accounts/9223372036854775808", 404, "not an account id"),
    ("/archive/networks/{n}/accounts/%EF%BC%91", 404, "not an account id"),  # a full-width digit
    ("/archive/networks/{n}/accounts/9223372036854775807", 404, "No account"),
    ("/archive/networks/{n}/accounts/1/home", 404, "No account"),
    ("/archive/networks/{n}/accounts/{a}/home?order=oldest", 400, "newest or likes"),
    ("/archive/networks/{n}/accounts/{a}?cursor=forged.cursor", 400, "invalid cursor"),
    ("/archive/networks/{n}/accounts?id=x1", 404, "not an account id"),
    ("/archive/networks/no-such-network/top", 404, "no top-100 snapshot"),
    ("/archive/networks/no-such-network/accounts/{a}", 404, "No account"),
])
def test_bad_input_is_a_clear_page_never_a_500(client, net, path, status, says):
    tree = page(client, path.format(n=net.name, a=net.author), status)
    message = tree.by_id("error-message")
    assert message.get("data-status") == str(status) and says in message.text()


def test_a_cursor_of_another_account_is_refused(client, net):
    other = next(a for a in net.ref.usernames if a != net.author and len(net.ref.q1(a)) > 1)
    cursor = client.get(f"/networks/{net.name}/accounts/{other}/posts?limit=1").json["next_cursor"]
    tree = page(client, f"/archive/networks/{net.name}/accounts/{net.author}?cursor={cursor}", 400)
    assert "invalid cursor" in tree.by_id("error-message").text()
