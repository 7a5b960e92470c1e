"""Settings are read from the environment once, and a bad value stops the start with the variable's name."""

from __future__ import annotations

import pytest

from api.config import ConfigError, Settings


@pytest.mark.parametrize(("name", "value", "says"), [
    ("CHRONICLE_CASSANDRA_PORT", "90x2", "is not an integer"),
    ("CHRONICLE_CASSANDRA_PORT", "70000", "outside 1..65535"),
    ("CHRONICLE_REQUEST_TIMEOUT", "soon", "is not a number"),
    ("CHRONICLE_REQUEST_TIMEOUT", "nan", "is not a number"),
    ("CHRONICLE_REQUEST_TIMEOUT", "0", "outside 0.01..inf"),
    ("CHRONICLE_MAX_BODY_BYTES", "-5", "outside 1024..inf"),
    ("CHRONICLE_SLACK_KEEP_RAW", "maybe", "is not true or false"),
    ("CHRONICLE_SPECULATIVE_ATTEMPTS", "99", "outside 0..10"),
    ("CHRONICLE_READ_CONSISTENCY", "SOMETIMES", "is not a Cassandra consistency level"),
])
def test_a_bad_value_names_its_variable(monkeypatch, name: str, value: str, says: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as raised:
        Settings.from_env()
    assert str(raised.value).startswith(f"{name}=") and says in str(raised.value)


def test_good_values_are_typed(monkeypatch) -> None:
    for name, value in {"CHRONICLE_CASSANDRA_PORT": " 9142 ", "CHRONICLE_REQUEST_TIMEOUT": "2.5",
                        "CHRONICLE_SLACK_KEEP_RAW": "off", "CHRONICLE_SPECULATIVE_ATTEMPTS": "0"}.items():
        monkeypatch.setenv(name, value)
    s = Settings.from_env()
    assert (s.cassandra_port, s.request_timeout, s.slack_keep_raw_events, s.speculative_attempts) == (
        9142, 2.5, False, 0)
