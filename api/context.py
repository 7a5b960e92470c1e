"""The runtime a request runs with: the app's own settings and Database, built once by `create_app` and kept in
`app.extensions` (the Flask tutorial's pattern). Transport code (blueprints, pages) asks `get_db()` here; domain
code is given the Database. Outside a request (the CLI, workers, tests calling domain functions) the process's
installed Database answers (api/db.py)."""

from __future__ import annotations

import dataclasses
import os

from flask import Flask, current_app, has_app_context

from api import db as db_module
from api.config import Settings
from api.db import Database

EXTENSION = "chronicle"


@dataclasses.dataclass(frozen=True)
class Context:
    settings: Settings
    db: Database


def install(app: Flask, context: Context) -> None:
    app.extensions[EXTENSION] = context


def current() -> Context:
    """The app's context inside a request (or app context), else the process's Database and its settings."""
    if has_app_context():
        found = current_app.extensions.get(EXTENSION)
        # An app built before a fork (gunicorn's preload, off here) must not hand a child its parent's Database.
        if found is not None and found.db.pid == os.getpid():
            return found
    database = db_module.get_db()
    return Context(database.settings, database)


def get_db() -> Database:
    """The Database of the app serving this request (else the process's)."""
    return current().db
