"""gunicorn's own log lines (booting, signals, worker timeouts) in the app's JSON, so one parser reads every
line of the server's output. gunicorn.conf.py names it as `logger_class`."""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from api.observability import json_formatter


class JsonLogger(Logger):
    """gunicorn's logger with the app's JSON renderer on its error log (also after a reload re-runs setup).
    The access log keeps gunicorn's own line format, which gunicorn.conf.py makes a JSON object."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(json_formatter())
