"""The follower-network archive (seed 004): one module per table family, cross-table operations in actions.py."""
