"""What erasing a Slack person or a network account does to every table of the schema, and which check of the
proofs (proof.py, network.py) covers it (docs/retention.md, "Erasure"). `tests/test_erasure.py` fails when a table
of cql/ has no rule here: a new table cannot be forgotten.

Rules start with what happens: `erased` (their rows go), `rewritten` (others' rows stop naming them), `rebuilt`
(derived from what remains), `proof:` (how the proof reads it), `none` (holds no person's data, and why),
`tagging` (another archive kind: see the rule).
"""

from __future__ import annotations

from api.retention.rules import NETWORK_TABLES, TAGGING_TABLES  # the same tables, another rule

SLACK = {
    "slack_messages": "erased: their messages (a thread head others replied to becomes Slack's tombstone); "
                      "rewritten: others' messages lose their reactions and mentions; proof: every row of the "
                      "channel-days the ledger recorded",
    "slack_channel_days": "none: days of a channel, no person (a day keeps its listing; others' messages remain)",
    "slack_message_versions": "erased: versions of their messages; rewritten: others' versions mentioning them; "
                              "proof: the ledger's messages",
    "slack_thread_replies": "erased: their replies' rows; proof: the threads the ledger recorded",
    "slack_message_raw": "erased: their messages' raw events; rewritten: others' that name them; proof: the "
                         "ledger's messages",
    "slack_search_postings": "erased: every posting of every text their messages had; rewritten: others' messages "
                             "lose the terms only the mention gave; proof: the postings of their author and "
                             "mention terms",
    "slack_search_term_days": "erased: with the postings; proof: the listing of their author and mention terms",
    "slack_search_backfill": "none: index-search progress per channel",
    "slack_user_touches": "erased: their partitions of every year; proof: each partition",
    "slack_user_posts": "erased: their posts' hour partitions; proof: the hours of the ledger's messages",
    "slack_user_activity_hours": "erased: their partitions of every year (rows of before cql/0240); proof: each",
    "slack_user_activity": "erased: their partitions of every year (rows of before cql/0220); proof: each",
    "activity_days": "erased: their stored days (every year's partition, above every write time; a network "
                     "account's likewise); rebuilt: the days of others their "
                     "reactions and messages showed in (dirty marks); proof: their partitions",
    "activity_rebuild_progress": "none: units done per rebuild run",
    "slack_reports": "rebuilt: every stored report naming them is generated again; proof: every stored report",
    "slack_report_index": "rebuilt: with its report",
    "slack_report_jobs": "none: a job's options and state (expires: TTL)",
    "slack_users": "erased: their profile row, above every write time (no replay brings it back); proof: the row",
    "slack_channels": "rewritten: creator and the channel objects (raw, listed members) without them; proof: "
                      "every channel's row",
    "slack_channel_names": "none: channel names",
    "slack_channel_index": "none: channel ids and names",
    "slack_versions": "none: a counter per channel id and page kind (names no one)",
    "slack_channel_members": "none: member counts, not members",
    "slack_backfill_cursors": "none: backfill progress",
    "slack_import_progress": "none: import progress",
    "slack_installations": "none: the app's install (the installing person's id and tokens are the app's "
                           "credentials: uninstall removes them)",
    "slack_oauth_states": "none: expires in minutes",
    "slack_event_inbox": "none kept: envelopes live 7 days (TTL); an erasure's writes are timed after them, so a "
                         "replay cannot bring a message back",
    "slack_event_receivers": "none: receivers' progress",
}

SHARED = {
    "work_items": "none kept: queued work is done and deleted (a mark for them rebuilds nothing: their index "
                  "is gone)",
    "work_buckets": "none: the work queue's bookkeeping",
    "work_checkpoints": "none: the work queue's bookkeeping",
    "work_groups": "none: the work queue's bookkeeping",
    "work_shards": "none: the work queue's bookkeeping",
    "work_workers": "none: the work queue's bookkeeping",
    "audit_log": "none: who read the archive (admins and tokens, never a Slack person); its own retention",
    "retention_policies": "none: policies",
    "legal_holds": "kept: a hold naming them is the record of why their data was kept",
    "retention_runs": "none: run reports (counts)",
    "erasure_requests": "none: the ledger names the person only by a keyed hash",
    "erasure_touched": "none: message keys, not the person",
}

# Erasing a follower-network account (api/erasure/network.py); the Slack rules above do not touch networks.
NETWORK = {
    "network_accounts": "erased: the account's row; proof: the row",
    "network_account_counts": "erased: its counters (every bucket); rewritten: the counts of those it followed "
                              "and who followed it (unfollows); proof: its rows",
    "celebrity_accounts": "erased: its row; proof: the partition's rows",
    "celebrity_flags": "erased: its row; proof: the row",
    "celebrity_last_posts": "erased: its row (after its write time); proof: the row",
    "posts_by_author": "erased: its month partitions; rewritten: others' posts naming it (\"@former_account\"); "
                       "proof: the ledger's months",
    "post_months_by_author": "erased: its listing; proof: the partition",
    "shares_by_original": "erased: the shares of its posts are rewritten (\"@former_account\", original author "
                          "\"former_account\") and its share index dropped, and its own shares' rows in others'; "
                          "proof: its name's index (the erasure's own proof: the ledger keeps no name), and "
                          "its own shares' rows the ledger recorded",
    "share_months_by_original": "erased: its share index's listing; proof: the partition",
    "network_period_accounts": "erased: its rows under the months of its posts and the days of its likes and "
                               "follows; proof: those rows",
    "network_periods": "none: which months and days have content (no account)",
    "posts_by_id": "erased: each post's row; rewritten: others' posts naming it; proof: the ledger's posts and "
                   "rewritten posts",
    "post_like_counts": "erased: its posts' counters; rewritten: the counts of posts it liked (unlikes); proof: "
                        "the ledger's posts",
    "post_requests": "none kept: an (author, idempotency key) answer holds a post id and a digest, no content, and "
                     "expires in a day (TTL); a retry after the erasure finds no account",
    "likes_by_post": "erased: the likes of its posts; rewritten: its likes out of posts it liked; proof: the "
                     "ledger's posts and liked posts",
    "likes_by_user": "erased: its list, and others' likes of its posts; proof: its partition",
    "follower_relations_by_account": "erased: its partitions; rewritten: the other side of each relation "
                                     "(unfollows); proof: its partitions and the ledger's relations",
    "follower_buckets": "erased: its buckets (every layout); rewritten: its rows in those it followed; proof: "
                        "its buckets and the ledger's relations",
    "follower_layouts": "erased: its row; proof: the row",
    "followed_celebrities": "erased: its partition; rewritten: its mark in its followers'; proof: both",
    "home_timeline_buckets": "erased: its cache, and the copies of its posts and of rewritten posts in readers' "
                             "caches (followers, who unfollowed it within the cache TTL, the rewritten posts' "
                             "authors' followers: every hour bucket of the TTL and every build listed); proof: "
                             "the ledger's readers",
    "home_cache_builds": "erased: its listing; proof: its partition (others' hold bucket numbers only)",
    "home_cache_state": "erased: its row; proof: the row",
    "home_excluded_authors": "erased: its partition, and readers' exclusion of it; proof: the ledger's readers",
    "home_likes_rankings": "erased: its row, and readers' (post ids of its posts: ranked again on the next read); "
                           "proof: its row",
    "term_postings": "erased: every posting of its posts; rewritten: the postings of posts naming it (indexed "
                     "again under their new text); proof: the ledger's posts and terms",
    "term_top_posts": "erased: its posts' rows in the current and previous generation, and the top lists of its "
                      "name's terms; proof: the same rows",
    "term_counts": "erased: the counters of its name's terms (`@name`, `name`) once nothing is posted under them",
    "term_top_state": "erased: the states of its name's terms, likewise",
    "network_activity_slots": "erased: its slot partitions of every day it had events; rewritten: the other side "
                              "of each event names the former account (id 0); proof: its days and the ledger's "
                              "other accounts' days",
    "network_activity_counts": "erased: its day partitions (others' counts name no account); proof: with the slots",
    "network_activity_log": "erased: its day partitions (events before cql/0140); rewritten: the other sides; "
                            "proof: with the slots",
    "network_activity_days": "erased: its listing; proof: its partition",
    "top100_accounts_by_time": "rewritten: every Q2 snapshot naming it shows the former account (id 0, no "
                               "username) in its place; proof: every snapshot",
    "top100_followers_by_time": "rewritten: every Q3 snapshot naming it, likewise; proof: every snapshot",
    "ranking_months_by_network": "none: months holding snapshots",
    "ranking_jobs": "none: a job's state and snapshot id",
}
assert set(NETWORK) == set(NETWORK_TABLES), sorted(set(NETWORK) ^ set(NETWORK_TABLES))

TAGGING = dict.fromkeys(TAGGING_TABLES, "tagging: items hold addresses of archived messages (an erased one "
                                         "resolves as missing); taggers are the project's own people, not Slack "
                                         "persons")

RULES: dict[str, str] = {**SLACK, **SHARED, **NETWORK, **TAGGING}
