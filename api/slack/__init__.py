"""The Slack archive: one module per table family, cross-table writes in ingest.py, Events API in events.py."""
