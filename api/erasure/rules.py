"""What erasing a Slack person does to every table of the schema, and which check of the proof (proof.py) covers
it (docs/retention.md, "Erasure"). `tests/test_erasure.py` fails when a table of cql/ has no rule here: a new
table cannot be forgotten.

Rules start with what happens: `erased` (their rows go), `rewritten` (others' rows stop naming them), `rebuilt`
(derived from what remains), `proof:` (how the proof reads it), `none` (holds no person's data, and why),
`network` / `tagging` (another archive kind: see the rule).
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
    "activity_days": "erased: their stored days (every year's partition); rebuilt: the days of others their "
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

NETWORK = dict.fromkeys(NETWORK_TABLES, "network: erasure of a network account is not built yet (docs/retention.md)")

TAGGING = dict.fromkeys(TAGGING_TABLES, "tagging: items hold addresses of archived messages (an erased one "
                                         "resolves as missing); taggers are the project's own people, not Slack "
                                         "persons")

RULES: dict[str, str] = {**SLACK, **SHARED, **NETWORK, **TAGGING}
