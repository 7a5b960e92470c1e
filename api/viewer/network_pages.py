"""The archive's follower-network pages (/archive/networks/...): a network's landing page, an account (counts and
its posts newest first, a page at a time), its home timeline (newest or most-liked), the top-100 rankings with
their history drawn as SVG charts, and the word search.

Network reads are public, as in the REST API (api/network/http.py): no sign-in. The pages call the same owner
and action functions as the REST routes, with the same rules (network names, bigint ids, the Q1 cursor: a cursor
of GET /networks/<n>/accounts/<id>/posts pages this page too). Server-rendered (Jinja,
api/templates/viewer/network/), no script; every text is escaped by Jinja.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, redirect, render_template, request
from markupsafe import Markup, escape

from api.activity import calendar
from api.context import get_db
from api.network import accounts, home, post_search, posts, rankings, search
from api.network.common import valid_network_name
from api.network.settings import network_settings
from api.network.values import Account, Post
from api.pages import PageError, error_pages, secure
from api.paging import sign_cursor, verify_cursor
from api.text import normalise
from api.viewer import charts
from api.viewer.session import TZ_COOKIE, current_reader, zone_of

_API_DIR = Path(__file__).resolve().parents[1]

bp = Blueprint("archive_networks", __name__, url_prefix="/archive/networks",
               template_folder=str(_API_DIR / "templates"))

PAGE_SIZE = 25  # posts per page of an account (the REST API's default limit)
POST_COUNT_CAP = 500  # an account's posts are counted up to this many (no stored count: a bounded read)
HISTORY = 30  # ranking snapshots drawn
CHART_SERIES = 10  # accounts drawn in a ranking's history: the latest snapshot's first ten
LANDING_TOP = 10
MAX_ID = 2**63 - 1  # ids are bigint: a larger number names no account (404)
RANKINGS = {"accounts": ("follower_count", "followers"), "followers": ("follows_top", "of the top 100 followed")}



@bp.after_request
def _headers(response: Response) -> Response:
    secure(response)
    response.headers["Cache-Control"] = "no-store"  # counts and rankings move: never a stale page
    return response


def _page_error(exc: PageError) -> tuple[str, int]:
    network = request.view_args.get("network") if request.view_args else None
    return render_template("viewer/network/error.html", error=exc, reader=current_reader(),
                           network=network if network and valid_network_name(network) else None), exc.status


error_pages(bp, _page_error)




# -- input -------------------------------------------------------------------------------------------------------

def _network(network: str) -> str:
    if not valid_network_name(network):
        raise PageError(404, "Not found", "That is not a network name (1-64 letters, digits, '_' or '-').")
    return network


def _account_id(raw: str) -> int:
    """An account id as the REST routes take it: a whole number up to the bigint maximum; anything else is 404."""
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > MAX_ID:
        raise PageError(404, "Not found", "That is not an account id (a whole number).")
    return int(raw)


def _account(network: str, account_id: int) -> Account:
    found = accounts.get_account(get_db(), network, account_id)
    if found is None:
        raise PageError(404, "Not found", f"No account {account_id} in network {network}.")
    return found


def _zone() -> tzinfo:
    """The reader's zone when the sign-in recorded one (the pages themselves need no sign-in), else UTC."""
    return calendar.zone(zone_of(request.cookies.get(TZ_COOKIE)))


# -- view-models -------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PostView:
    post: Post
    author_name: str
    author_url: str
    at: datetime  # in the reader's zone
    text: Markup  # escaped, search words marked
    hue: int

    @property
    def initial(self) -> str:
        return next((c for c in self.author_name if c.isalnum()), "?").upper()

    @property
    def time_label(self) -> str:
        return self.at.strftime("%d %b %Y, %H:%M")


def _hue(account_id: int) -> int:
    return zlib.crc32(str(account_id).encode()) % 8


def account_url(network: str, account_id: int) -> str:
    return f"/archive/networks/{network}/accounts/{account_id}"


_WORD = re.compile(r"[#@]?\w+(?:['’ʼ]\w+)*")


def marked(text: str | None, terms: frozenset[str] = frozenset()) -> Markup:
    """The post's text escaped, with the searched terms in <mark> (a word whose normalised form is a term, or a
    #tag / @name whose sigil form is)."""
    if not text:
        return Markup("")
    if not terms:
        return escape(text)
    out, last = [], 0
    for match in _WORD.finditer(text):
        token = match.group()
        word = normalise(token.lstrip("#@")).strip("_'")
        if word in terms or normalise(token) in terms:
            out.append(escape(text[last:match.start()]))
            out.append(Markup("<mark>") + escape(token) + Markup("</mark>"))
            last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def post_views(network: str, found: list[Post], zone: tzinfo, terms: frozenset[str] = frozenset()
               ) -> list[PostView]:
    return [PostView(p, p.author_username or f"account {p.author_id}", account_url(network, p.author_id),
                     p.posted_at.astimezone(zone), marked(p.content, terms), _hue(p.author_id)) for p in found]


def _render(template: str, network: str | None, **values: Any) -> tuple[str, int]:
    return render_template(f"viewer/network/{template}", reader=current_reader(), network=network,
                           account_url=account_url, page_size=network_settings().page_size, **values), 200


# -- landing -----------------------------------------------------------------------------------------------------

@bp.get("")
def networks() -> Response | tuple[str, int]:
    """A form to open a network by name (Chronicle keeps no bounded list of networks to show)."""
    name = request.args.get("network", "").strip()
    if not name:
        return _render("networks.html", None, error=None)
    if valid_network_name(name):
        return redirect(f"/archive/networks/{name}", code=303)
    page, _ = _render("networks.html", None, error="A network name is 1-64 letters, digits, '_' or '-'.")
    return page, 400


@bp.get("/<network>")
def network_page(network: str) -> tuple[str, int]:
    """A network: the latest top-10 (from the rankings), opening an account by id, the word search."""
    _network(network)
    latest = rankings.snapshots(get_db(), network, "accounts", limit=1)
    snapshot = latest[0] if latest else None
    return _render("network.html", network, top=(snapshot or {}).get("accounts", [])[:LANDING_TOP],
                   taken_at=_taken_at(snapshot) if snapshot else None)


@bp.get("/<network>/accounts")
def open_account(network: str) -> Response:
    """The network page's "open an account" form (a GET form cannot fill a path)."""
    _network(network)
    return redirect(account_url(network, _account_id(request.args.get("id", ""))), code=303)


# -- account: Q1 -------------------------------------------------------------------------------------------------

def _settings():
    return current_app.config["CHRONICLE_SETTINGS"]


def _q1_scope(network: str, account_id: int) -> str:
    return f"q1|{network}|{account_id}"  # the REST listing's scope (api/network/http.py list_posts)


def _q1_before(cursor: str, scope: str) -> posts.Position:
    """The (month, time, post id) a Q1 cursor points after: the REST route's cursor format."""
    position = verify_cursor(cursor, _settings().cursor_secret, scope)
    try:
        return str(position["m"]), datetime.fromtimestamp(position["t"] / 1000, UTC), int(position["p"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise PageError(400, "Bad request", "invalid cursor: use the page's own links") from None


def _q1_cursor(last: Post, scope: str) -> str:
    month, posted_at, post_id = posts.position_of(last)
    return sign_cursor({"m": month, "t": int(posted_at.timestamp() * 1000), "p": post_id}, _settings().cursor_secret,
                       scope)


@bp.get("/<network>/accounts/<account_id>")
def account_page(network: str, account_id: str) -> tuple[str, int]:
    """An account: name, followers, follows, its posts (counted up to POST_COUNT_CAP), newest first, PAGE_SIZE a
    page; `cursor` continues after a page (the REST listing's cursor)."""
    _network(network)
    number = _account_id(account_id)
    account = _account(network, number)
    db = get_db()
    scope = _q1_scope(network, number)
    cursor = request.args.get("cursor", "")
    months = posts.author_months(db, network, number)
    # The first page comes out of the count's read; a later page is a read of its own after the cursor.
    counted = posts.posts_of_author(db, network, number, POST_COUNT_CAP + 1, months=months)
    if cursor:
        page = posts.posts_of_author(db, network, number, PAGE_SIZE + 1, before=_q1_before(cursor, scope),
                                     months=months)
    else:
        page = counted[:PAGE_SIZE + 1]
    next_cursor = _q1_cursor(page[PAGE_SIZE - 1], scope) if len(page) > PAGE_SIZE else None
    return _render("account.html", network, account=account, hue=_hue(number),
                   post_count=min(len(counted), POST_COUNT_CAP), more_posts=len(counted) > POST_COUNT_CAP,
                   first_month=months[-1] if months else None,
                   posts=post_views(network, page[:PAGE_SIZE], _zone()), next_cursor=next_cursor,
                   paged=bool(cursor))


# -- home: Q4 ----------------------------------------------------------------------------------------------------

@bp.get("/<network>/accounts/<account_id>/home")
def home_page(network: str, account_id: str) -> tuple[str, int]:
    """Q4: the home timeline's 25 newest (`order=newest`) or 25 most-liked (`order=likes`) posts."""
    _network(network)
    number = _account_id(account_id)
    order = request.args.get("order", "newest")
    if order not in ("newest", "likes"):
        raise PageError(400, "Bad request", "order is newest or likes")
    found = home.home_of(get_db(), network, number, order)
    if found is None:
        raise PageError(404, "Not found", f"No account {number} in network {network}.")
    return _render("home.html", network, account=found["account"], hue=_hue(number), order=order,
                   posts=post_views(network, found["posts"], _zone()), cache_rebuilt=found["cache_rebuilt"],
                   cap=network_settings().cache_cap)


# -- rankings: Q2 / Q3 -------------------------------------------------------------------------------------------

def _taken_at(snapshot: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(snapshot["taken_at"].replace("Z", "+00:00"))


@dataclasses.dataclass(frozen=True)
class RankedRow:
    rank: int
    account_id: int
    username: str | None
    value: int
    change: int | None  # places up (positive) since the previous snapshot; None: it was not ranked then
    hue: int


@dataclasses.dataclass(frozen=True)
class Ranking:
    kind: str  # accounts | followers
    rows: list[RankedRow]
    taken_at: datetime
    previous_at: datetime | None
    snapshots: int
    chart: Markup
    legend: list[tuple[int, RankedRow]]  # (series class number, row)
    value_name: str


def _ranking(network: str, kind: str, found: list[dict[str, Any]], zone: tzinfo) -> Ranking | None:
    """A ranking's latest snapshot as table rows (with the move since the snapshot before) and its history as a
    chart: the latest first ten accounts' values over the snapshots (oldest first)."""
    if not found:
        return None
    field, value_name = RANKINGS[kind]
    latest, previous = found[0][kind], found[1][kind] if len(found) > 1 else None
    before = {a["account_id"]: i for i, a in enumerate(previous or [])}
    rows = [RankedRow(i + 1, a["account_id"], a.get("username"), a.get(field) or 0,
                      (before[a["account_id"]] - i) if a["account_id"] in before else None, _hue(a["account_id"]))
            for i, a in enumerate(latest)]
    oldest_first = list(reversed(found))
    values = [{a["account_id"]: a.get(field) or 0 for a in s[kind]} for s in oldest_first]
    drawn = rows[:CHART_SERIES]
    series = [charts.Series(str(r.account_id), r.username or f"account {r.account_id}",
                            [v.get(r.account_id) for v in values]) for r in drawn]
    title = ("Followers of today's top 10 over the snapshots" if kind == "accounts"
             else "How many of the top 100 today's top 10 follow, over the snapshots")
    chart = charts.history_chart(f"chart-top-{kind}", title, [_taken_at(s) for s in oldest_first], series,
                                 zone=zone, value_name=value_name)
    return Ranking(kind, rows, _taken_at(found[0]), _taken_at(found[1]) if len(found) > 1 else None, len(found),
                   chart, [(k % charts.SERIES_CLASSES, r) for k, r in enumerate(drawn)], value_name)


@bp.get("/<network>/top")
def top_page(network: str) -> tuple[str, int]:
    """Q2 and Q3: the latest top-100 snapshots as tables, and their last HISTORY snapshots as charts."""
    _network(network)
    db = get_db()
    zone = _zone()
    found = {kind: rankings.snapshots(db, network, kind, limit=HISTORY) for kind in rankings.KINDS}
    built = {kind: _ranking(network, kind, found[kind], zone) for kind in rankings.KINDS}
    if not any(built.values()):
        raise PageError(404, "No rankings yet",
                               f"Network {network} has no top-100 snapshot: run the rankings job (`chronicle network "
                               f"rankings --network {network}` or POST /networks/{network}/rankings).")
    return _render("top.html", network, top_accounts=built["accounts"], top_followers=built["followers"],
                   zone=zone, history=HISTORY)


# -- word search: Q6 ---------------------------------------------------------------------------------------------

@bp.get("/<network>/search")
def search_page(network: str) -> tuple[str, int]:
    """Q6: the 25 most-liked posts holding every word of `q` (no paging: the REST answer is one page too)."""
    _network(network)
    query = request.args.get("q", "")
    if len(query) > search.MAX_QUERY_CHARS:
        raise PageError(400, "Bad request", f"A search is at most {search.MAX_QUERY_CHARS} characters.")
    words = search.parse_query(query) if query.strip() else []
    found = post_search.search_posts(get_db(), network, words, network_settings().page_size) if words else None
    return _render("search.html", network, query=query, words=words, searched=bool(query.strip()),
                   exact=found.exact if found else True,
                   posts=post_views(network, found.posts, _zone(), frozenset(words)) if found else [])

