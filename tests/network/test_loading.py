"""Loading: every query equals the reference right after loading, and re-running the loader (in one or
several processes) changes nothing, counts included."""

from __future__ import annotations

from api.network import actions, loader
from tests.network.checks import check_home, check_posts, check_rankings, check_search, sample_accounts


def test_loaded_network_answers_like_the_reference(net, client):
    ref = net.ref
    for account, _ in ref.q2(100):
        check_posts(client, net.name, ref, account)
    check_search(client, net.name, ref)
    assert check_home(client, net.name, ref, sample_accounts(ref)) > 0


def test_reloading_is_harmless(fresh_net, db, settings, client):
    net = fresh_net
    before = actions.compute_rankings(db, net.name)
    again = loader.load_network(db, net.name, net.clean)
    assert again["relations"] == 2 * len(net.ref.edges)
    loader.load_parallel(settings, "likes", net.name, net.clean / "likes.csv", workers=2)
    assert loader.load_parallel(settings, "relations", net.name, net.clean / "relations.csv", workers=3
                                ) == 2 * len(net.ref.edges)
    loader.load_parallel(settings, "accounts", net.name, net.clean / "accounts.csv", workers=2)
    after = actions.compute_rankings(db, net.name)
    check_rankings(before, net.ref)
    check_rankings(after, net.ref)
    check_search(client, net.name, net.ref)
