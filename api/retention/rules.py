"""What a retention run (a Slack workspace's; a follower network's: NETWORK) does with every table of the schema
(docs/retention.md, "Every table"). `tests/test_retention.py` fails when a table of cql/ has no rule here: a new
table cannot be forgotten.

Rules start with what happens: `deleted` (the run removes an expired channel-day's rows there), `rebuilt`
(derived from what remains), `kept` (and why), `expires` (the table's own TTL), `not content` (holds no message
content), `tagging` (a tagging project's own data). The network rules are the network run's.
"""

from __future__ import annotations

SLACK = {
    "slack_messages": "deleted: the channel-day's partitions (its own and its hour buckets), a partition "
                      "tombstone each",
    "slack_channel_days": "deleted: each run of expired days as one range tombstone (a held day cuts the range)",
    "slack_message_versions": "deleted: the partition of each edited message",
    "slack_thread_replies": "deleted: the partition of each thread head (its replies' list)",
    "slack_message_raw": "deleted: the hour partitions holding the day's messages",
    "slack_search_postings": "deleted: (term, day) partitions whole where only expired messages are posted (every "
                             "day before the workspace-wide cutoff; a word of these messages alone), else the "
                             "channel's postings row by row",
    "slack_search_term_days": "deleted: a (term, day) row with its partition; before the workspace-wide cutoff one "
                              "range per term",
    "slack_search_backfill": "not content: index-search progress per channel",
    "slack_user_touches": "deleted: the rows naming an expired channel-day (before the workspace-wide cutoff, one "
                          "range per user and year)",
    "slack_user_posts": "deleted: the author's posts of the channel-day (before the workspace-wide cutoff, the "
                        "author's hour partitions whole)",
    "slack_user_activity_hours": "deleted: one range per user and year before the workspace-wide cutoff (rows of "
                                 "before cql/0240, no longer written)",
    "slack_user_activity": "deleted: one range per user and year before the workspace-wide cutoff (rows of before "
                           "cql/0220, no longer written)",
    "activity_days": "rebuilt: the dirty worker rebuilds each touched user-day from what remains; before the "
                     "workspace-wide cutoff, dropped by one range per account and local year",
    "activity_rebuild_progress": "expires: TTL 30 days; not content (units done)",
    "slack_reports": "deleted: reports whose whole period lies before the workspace-wide cutoff",
    "slack_report_index": "deleted: with their report",
    "slack_report_jobs": "expires: TTL; not content (a job's state)",
    "slack_users": "kept: profiles and when a user was first seen and first posted (the new-poster figures need "
                   "them); erasure removes a person's",
    "slack_channels": "kept: channel metadata, not messages",
    "slack_channel_names": "kept: channel metadata, not messages",
    "slack_channel_index": "kept: channel metadata, not messages",
    "slack_versions": "kept: a counter per page scope (ETags), not content",
    "slack_channel_members": "kept: member counts over time, not messages",
    "slack_backfill_cursors": "not content: backfill progress",
    "slack_import_progress": "not content: import progress",
    "slack_installations": "not content: the app's install and its encrypted tokens",
    "slack_oauth_states": "expires: TTL; not content",
    "slack_event_inbox": "expires: TTL 7 days (envelopes acked by Socket Mode, replayed after a crash)",
    "slack_event_receivers": "not content: how far each Socket Mode receiver archived",
}

SHARED = {
    "work_items": "deleted by the work queue when done; a file fetch or mark of an expired message finds nothing",
    "work_buckets": "not content: the work queue's bookkeeping",
    "work_checkpoints": "not content: the work queue's bookkeeping",
    "work_groups": "not content: the work queue's bookkeeping",
    "work_shards": "not content: the work queue's bookkeeping",
    "work_workers": "not content: the work queue's bookkeeping",
    "audit_log": "expires: its own retention (CHRONICLE_AUDIT_RETENTION_DAYS)",
    "retention_policies": "kept: the policies",
    "legal_holds": "kept: the record of what was held",
    "retention_runs": "expires: TTL 400 days (the runs' reports)",
    "erasure_requests": "kept: the erasure ledger (it names no person)",
    "erasure_touched": "kept: which messages an erasure changed (keys, no content)",
}

NETWORK_TABLES = (
    "posts_by_author", "posts_by_id", "post_months_by_author", "post_like_counts", "post_requests",
    "likes_by_post", "likes_by_user", "follower_relations_by_account", "follower_buckets", "follower_layouts",
    "followed_celebrities", "celebrity_accounts", "celebrity_flags", "celebrity_last_posts", "home_cache_state",
    "home_excluded_authors", "home_likes_rankings", "home_timeline_buckets", "network_accounts",
    "network_account_counts", "network_activity_counts", "network_activity_log", "network_activity_slots",
    "ranking_jobs", "ranking_months_by_network", "term_counts", "term_postings", "term_top_posts", "term_top_state",
    "top100_accounts_by_time", "top100_followers_by_time", "network_activity_days", "home_cache_builds",
    "shares_by_original", "share_months_by_original", "network_periods", "network_period_accounts")
# A follower network's run (api/retention/network.py): posts older than the network's policy.
NETWORK = {
    "posts_by_author": "deleted: months wholly before the cutoff (partition tombstones), rows of the cutoff's month",
    "post_months_by_author": "deleted: the listing rows of those months",
    "posts_by_id": "deleted: each expired post's row (after its copies)",
    "shares_by_original": "deleted: each expired share's row (with its copies)",
    "network_periods": "deleted: the months and days the run expired (kept listed for an account under a hold)",
    "network_period_accounts": "deleted: the partitions of those months and days (with an account hold, the other "
                               "accounts' rows)",
    "share_months_by_original": "kept: which months an original author's shares were in (no content; an "
                                "erasure reading an emptied month reads nothing)",
    "post_like_counts": "deleted: the counters of expired posts",
    "likes_by_post": "deleted: the likes of expired posts, partition by partition",
    "likes_by_user": "deleted: the likers' rows of expired posts",
    "term_postings": "deleted: every posting of an expired post",
    "term_top_posts": "deleted: expired posts' rows in the current and previous generation of their terms",
    "term_counts": "kept: how many posts were ever indexed under a term (the Q6 plan counts deleted ones too)",
    "term_top_state": "kept: a term's top-list generation",
    "home_timeline_buckets": "expires: TTL (7 days); readers skip posts that are gone",
    "home_cache_builds": "expires: TTL (the cache's)",
    "home_cache_state": "expires: TTL (a day)",
    "home_excluded_authors": "expires: TTL (7 days); not content",
    "home_likes_rankings": "expires: TTL (a day); post ids only, gone posts are skipped",
    "network_activity_slots": "deleted: each account's slot partitions of the UTC days before the cutoff",
    "network_activity_counts": "deleted: each account's day partitions before the cutoff",
    "network_activity_log": "deleted: each account's day partitions before the cutoff (before cql/0140)",
    "network_activity_days": "deleted: the listing rows of those days",
    "top100_accounts_by_time": "deleted: snapshots taken before the cutoff (months whole, then a range)",
    "top100_followers_by_time": "deleted: with the Q2 snapshots",
    "ranking_months_by_network": "deleted: months wholly before the cutoff",
    "ranking_jobs": "expires: TTL 30 days; not content",
    "post_requests": "expires: TTL a day; no content",
    "network_accounts": "kept: accounts, not posts (erasure removes one)",
    "network_account_counts": "kept: follower counts (relations are state, not dated content)",
    "follower_relations_by_account": "kept: relations are state, not dated content",
    "follower_buckets": "kept: relations are state",
    "follower_layouts": "kept: where the followers are",
    "followed_celebrities": "kept: relations are state",
    "celebrity_accounts": "kept: the hybrid set",
    "celebrity_flags": "kept: the hybrid set",
    "celebrity_last_posts": "kept: a time, read with the posts (a gone post is skipped)",
}
assert set(NETWORK) == set(NETWORK_TABLES), sorted(set(NETWORK) ^ set(NETWORK_TABLES))

TAGGING_TABLES = (
    "tagging_control", "tagging_event_minutes", "tagging_events", "tagging_holds", "tagging_item_state",
    "tagging_late_events",
    "tagging_items", "tagging_keyword_uses", "tagging_keywords", "tagging_lease_log", "tagging_members",
    "tagging_online", "tagging_project_list", "tagging_projects", "tagging_queue", "tagging_team_usage",
    "tagging_teams", "tagging_tokens")
TAGGING = dict.fromkeys(TAGGING_TABLES, "tagging: items point at archived messages by address; a tagging "
                                         "project's own data is kept with the project (docs/retention.md)")

RULES: dict[str, str] = {**SLACK, **SHARED, **NETWORK, **TAGGING}
