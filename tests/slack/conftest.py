"""Fixtures of the Slack tests (plain helpers: tests/slack/helpers.py)."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def unique_channel():
    """A fresh channel id per call, so tests sharing the keyspace never see each other's data."""
    def make(prefix: str = "C") -> str:
        return f"{prefix}{uuid.uuid4().hex[:16].upper()}"
    return make
