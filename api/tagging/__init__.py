"""Tagging (seed 003, "Taggie"): projects over archived items, queues with leases, quotas, QA and statistics.
Design: docs/tagging.md."""
