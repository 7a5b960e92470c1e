"""Erasure of a person across every table of the archive (issue 32, docs/retention.md "Erasure")."""
