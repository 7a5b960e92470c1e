"""What a Slack workspace's retention run does with every table of the schema (docs/retention.md, "Every
table"). `tests/test_retention.py` fails when a table of cql/ has no rule here: a new table cannot be forgotten.

Rules start with what happens: `deleted` (the run removes an expired channel-day's rows there), `rebuilt`
(derived from what remains), `kept` (and why), `expires` (the table's own TTL), `not content` (holds no message
content), `network` / `tagging` (another archive kind: no retention run for them yet).
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
    "top100_accounts_by_time", "top100_followers_by_time", "network_activity_days", "home_cache_builds")
NETWORK = dict.fromkeys(NETWORK_TABLES, "network: no retention run for follower networks yet (docs/retention.md)")

TAGGING_TABLES = (
    "tagging_control", "tagging_event_minutes", "tagging_events", "tagging_holds", "tagging_item_state",
    "tagging_late_events",
    "tagging_items", "tagging_keyword_uses", "tagging_keywords", "tagging_lease_log", "tagging_members",
    "tagging_online", "tagging_project_list", "tagging_projects", "tagging_queue", "tagging_team_usage",
    "tagging_teams", "tagging_tokens")
TAGGING = dict.fromkeys(TAGGING_TABLES, "tagging: items point at archived messages by address; a tagging "
                                         "project's own data is kept with the project (docs/retention.md)")

RULES: dict[str, str] = {**SLACK, **SHARED, **NETWORK, **TAGGING}
