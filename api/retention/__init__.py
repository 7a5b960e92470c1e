"""Retention, legal holds (and, next, erasure) across the archive's tables: docs/retention.md."""
