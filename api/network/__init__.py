"""The follower-network archive (seed 004): one module per table family, cross-table operations
in actions.py (writes), home.py, celebrities.py, post_search.py, top100.py and maintenance.py (docs/architecture.md)."""
