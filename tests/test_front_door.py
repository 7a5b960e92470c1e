"""GET /: the front door, with the viewer's layout and security headers, linking every part; "Add to Slack" only
when the Slack app is configured; /docs still served offline (its assets are Chronicle's own)."""

from __future__ import annotations

from api.pages import CONTENT_SECURITY_POLICY


def test_the_front_door_links_every_part_with_the_shared_headers(client):
    r = client.get("/")
    assert r.status_code == 200 and r.mimetype == "text/html"
    assert r.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert r.headers["Cache-Control"] == "no-store" and r.headers["X-Content-Type-Options"] == "nosniff"
    for href in ('href="/archive"', 'href="/tagging"', 'href="/docs"', "chronicle.css", "front.css"):
        assert href in r.text, href
    assert "<script" not in r.text and " style=" not in r.text  # the CSP forbids inline code and style
    # No Slack app configured in the suite's settings: the way to configure one instead of the button.
    assert 'href="/slack/install"' not in r.text and "chronicle slack manifest" in r.text
    assert client.get("/slack/install").status_code == 404  # a page saying why, not JSON
    css = client.get("/front/static/front.css")
    assert css.status_code == 200 and "front-grid" in css.text


def test_docs_are_served_from_chronicle_itself(client):
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/docs/assets/" in docs.text
    assert "//cdn" not in docs.text and "unpkg" not in docs.text  # no asset from another host
    asset = client.get("/docs/assets/swagger-ui-bundle.js")
    assert asset.status_code == 200
