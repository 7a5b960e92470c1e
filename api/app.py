"""The Flask app factory: configuration, JSON errors, logs, metrics, OpenAPI and the blueprints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import swagger_ui_bundle
from flask import Flask, Response, send_from_directory
from flask_smorest import Api

from api import metrics
from api.config import Settings
from api.context import Context
from api.context import install as install_context
from api.db import READ_LEVELS, Database, get_db, set_db
from api.errors import register_error_handlers
from api.observability import FastJSONProvider, configure_logging, install_request_hooks
from api.pages import secure


class ChronicleFlask(Flask):
    """Flask with each function's synchronous form kept: Flask asks `inspect` whether every hook, view and error
    handler is a coroutine function on every request (~20 times a request here), and a function's answer never
    changes. Hooks and views are registered once; functions beyond _SYNC_FORMS_KEPT (a request's own
    `after_this_request` callbacks) are asked each time, as Flask does."""

    _SYNC_FORMS_KEPT = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sync_forms: dict[Callable[..., Any], Callable[..., Any]] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        try:
            return self._sync_forms[func]
        except KeyError:
            pass
        except TypeError:  # an unhashable callable
            return super().ensure_sync(func)
        sync = super().ensure_sync(func)
        if len(self._sync_forms) < self._SYNC_FORMS_KEPT:
            self._sync_forms[func] = sync
        return sync


def create_app(settings: Settings | None = None, *, database: Database | None = None) -> Flask:
    """Build the app. Nothing connects to Cassandra here: the first request of each process does."""
    # Checked once, here (and by gunicorn's master before it forks): a missing secret stops the start.
    settings = (settings or Settings.from_env()).validate()
    configure_logging(settings.log_level)
    if database is not None:
        set_db(database)  # also the process's: workers and background threads outside requests use it
    elif get_db().settings != settings:
        set_db(Database(settings))
    database = get_db()

    app = ChronicleFlask("chronicle")
    app.config.update(
        CHRONICLE_SETTINGS=settings,
        MAX_CONTENT_LENGTH=settings.max_body_bytes,
        API_TITLE="Chronicle",
        API_VERSION="1.0",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/",
        OPENAPI_JSON_PATH="openapi.json",
        # /docs is api/pages.py's (Swagger UI without inline script); its files come from the pinned
        # swagger-ui-bundle package, served below at /docs/assets/: /docs works offline.
        API_SPEC_OPTIONS={
            "info": {"description": "Cassandra-backed archive of Slack workspaces and follower networks."},
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        },
    )
    install_context(app, Context(settings, database))
    app.json = FastJSONProvider(app)
    app.json.sort_keys = False  # answers keep their fields in schema order (JSON_SORT_KEYS is gone since Flask 2.3)
    install_request_hooks(app)
    # One header policy for every response (CSP, nosniff, frame-ancestors, Referrer-Policy, no-store on HTML):
    # pages, JSON, /docs, static files and every error answer (api/pages.py, docs/security.md#headers).
    app.after_request(secure)
    api = Api(app)
    register_error_handlers(app)

    from api.health import blp as health_blp

    api.register_blueprint(health_blp)
    for blueprint in _feature_blueprints():
        api.register_blueprint(blueprint)
    from api.audit_http import blp as audit_blp
    from api.audit_http import install as install_audit

    api.register_blueprint(audit_blp)
    from api.erasure.http import blp as erasure_blp
    from api.retention.http import blp as retention_blp

    api.register_blueprint(retention_blp)
    api.register_blueprint(erasure_blp)
    install_audit(app)  # every GET of archive content is recorded (api/audit.py)
    _document_server_refusals(api)
    _document_read_consistency(api)
    _register_pages(app)

    @app.get("/docs/assets/<path:filename>")
    def _swagger_ui_asset(filename: str) -> Response:
        return send_from_directory(swagger_ui_bundle.swagger_ui_path, filename, max_age=86400)

    @app.get("/metrics")
    def _metrics() -> Response:
        body, content_type = metrics.render()
        return Response(body, content_type=content_type)

    return app


def _register_pages(app: Flask) -> None:
    """Server-rendered pages (not API operations, so outside the OpenAPI document)."""
    from api.pages import common as common_assets
    from api.pages import docs_ui, front_door, versioned_assets
    from api.slack.install_http import bp as slack_install
    from api.tagging.pages import bp as tagging_pages
    from api.viewer.network_pages import bp as archive_networks
    from api.viewer.report_pages import bp as archive_reports
    from api.viewer.session import bp as archive_session
    from api.viewer.slack_pages import bp as archive_pages

    app.register_blueprint(common_assets)
    app.register_blueprint(docs_ui)
    app.register_blueprint(front_door)
    app.register_blueprint(slack_install)
    app.register_blueprint(tagging_pages)
    app.register_blueprint(archive_session)
    app.register_blueprint(archive_pages)
    app.register_blueprint(archive_networks)
    app.register_blueprint(archive_reports)
    versioned_assets(app)


def _document_server_refusals(api: Api) -> None:
    """Every operation can be refused before Flask sees it: a request line over gunicorn's limit answers
    414 (as JSON, see api/server_errors.py). State it in the document for each operation."""
    api.spec.components.response("UriTooLong", {
        "description": "the URL is longer than the server accepts (4094 bytes of request line)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    for operations in api.spec._paths.values():
        for method, operation in operations.items():
            if method != "parameters" and isinstance(operation, dict):
                operation.setdefault("responses", {}).setdefault("414", {"$ref": "#/components/responses/UriTooLong"})


def _document_read_consistency(api: Api) -> None:
    """Every read takes X-Read-Consistency (api/observability.py): e.g. LOCAL_QUORUM to see the client's own
    acknowledged writes on a replicated cluster. An unknown level answers 400."""
    api.spec.components.parameter("ReadConsistency", "header", {
        "name": "X-Read-Consistency", "required": False,
        "description": "The consistency level of this request's reads (default: the service's configured "
                       "level; LOCAL_QUORUM for lookups by key). LOCAL_QUORUM sees every write acknowledged at "
                       "LOCAL_QUORUM, also while a replica catches up after an outage.",
        "schema": {"type": "string", "enum": list(READ_LEVELS)}})
    api.spec.components.response("BadReadConsistency", {
        "description": "bad request (e.g. an unknown X-Read-Consistency level)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    for operations in api.spec._paths.values():
        for method, operation in operations.items():
            if method == "get" and isinstance(operation, dict):
                operation.setdefault("parameters", []).append({"$ref": "#/components/parameters/ReadConsistency"})
                operation.setdefault("responses", {}).setdefault(
                    "400", {"$ref": "#/components/responses/BadReadConsistency"})


def _feature_blueprints() -> list:
    """Blueprints of the archive's features, each owned by its package."""
    from api.activity.http import blp as activity_blp
    from api.network.http import blp as network_blp
    from api.slack.http import blueprints as slack_blueprints
    from api.tagging.http import blp as tagging_blp

    # The Slack blueprints are new per app: the Events route is at the app's settings path.
    return [*slack_blueprints(), network_blp, activity_blp, tagging_blp]
