"""gunicorn settings for a 2-core machine that also runs Cassandra. Every value can be overridden by env."""

import os
import shutil
import sys
import tempfile


def _check_settings() -> None:
    """The app's settings, checked once in the master before any worker forks: a missing or published secret
    (outside CHRONICLE_ENV=development) or a bad CHRONICLE_API_TOKENS stops the start with a message naming the
    variable, instead of workers failing to boot one after the other (api/config.py: Settings.validate)."""
    from api.config import Settings, share_development_secret

    share_development_secret()
    try:
        Settings.from_env().validate()
    except ValueError as exc:  # ConfigError, or a number that is not one
        sys.exit(f"chronicle: {exc}")


_check_settings()

bind = os.environ.get("CHRONICLE_BIND", "127.0.0.1:8080")
# 2 cores shared with Cassandra: a few sync workers, each with threads (the driver's I/O runs on libev).
workers = int(os.environ.get("CHRONICLE_WORKERS", "3"))
# The project's gthread worker: a request's head and body arrive on the worker's event loop and a thread only serves
# complete requests, so slow clients cannot hold the threads (api/server_worker.py, docs/deployment.md); deadlines:
# CHRONICLE_REQUEST_HEAD_TIMEOUT / CHRONICLE_REQUEST_BODY_TIMEOUT (408 after).
worker_class = "api.server_worker.ServerWorker"
# Connections one worker holds (slow, idle kept-alive or in progress); at the limit idle ones are closed first.
worker_connections = 1000
threads = int(os.environ.get("CHRONICLE_THREADS", "8"))
timeout = int(os.environ.get("CHRONICLE_WORKER_TIMEOUT", "30"))
graceful_timeout = 20
keepalive = 5
# The app must NOT be preloaded: each worker creates its own Cassandra Cluster after the fork.
preload_app = False
# The app logs every request it answers as one JSON line (request id, endpoint, status, latency): gunicorn's
# access log would be a second line per request. CHRONICLE_ACCESS_LOG=- turns it on (e.g. to see requests
# gunicorn refused before the app, which its error log also reports).
accesslog = os.environ.get("CHRONICLE_ACCESS_LOG") or None
access_log_format = (
    '{"remote":"%(h)s","request":"%(r)s","status":%(s)s,"bytes":%(B)s,"ms":%(M)s,"rid":"%({x-request-id}o)s"}'
)
errorlog = "-"
logger_class = "api.server_logging.JsonLogger"  # gunicorn's own lines as JSON, like the app's
loglevel = os.environ.get("CHRONICLE_LOG_LEVEL", "info").lower()

# gunicorn 25+ opens a control socket at one path per user ($XDG_RUNTIME_DIR or ~/.gunicorn): a second instance
# on the host (a test, a benchmark) would take it over and delete it on exit. Off unless a path is given.
control_socket = os.environ.get("CHRONICLE_CONTROL_SOCKET", "")
control_socket_disable = not control_socket

# Prometheus multiprocess mode: workers write their samples here; /metrics merges them.
_metrics_dir = os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", os.path.join(tempfile.gettempdir(), f"chronicle-metrics-{os.getpid()}")
)


def on_starting(server):
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    os.makedirs(_metrics_dir, exist_ok=True)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker):
    # Errors gunicorn answers itself (414 URI Too Long, 400 bad request line, 431) as JSON, like the API's.
    from api.server_errors import install

    install()
    # Everything loaded so far (modules, the app, the routes) lives as long as the worker: moved out of the
    # collector's reach, a full collection no longer walks it (it took 40-50 ms every ~60 search requests).
    import gc

    gc.collect()
    gc.freeze()


# `bash bootstrap.sh serve` also runs the background workers (CHRONICLE_BACKGROUND_WORKERS=1): the network job
# worker (promotions, demotions, like purges, term top lists), the Slack file and report workers, started once the
# server is ready and stopped (SIGTERM: they finish the current item) when it exits; with CHRONICLE_SLACK_SOCKET_MODE
# on, also `chronicle slack socket-mode` (Slack's events over its WebSocket). In production run them as services.
_background = []


def when_ready(server):
    if os.environ.get("CHRONICLE_BACKGROUND_WORKERS") != "1":
        return
    import subprocess
    import sys

    from api.config import SlackSettings

    chronicle = os.path.join(os.path.dirname(sys.executable), "chronicle")
    workers = [["network", "worker"], ["slack", "file-worker"], ["slack", "report-worker"], ["activity", "worker"],
               ["tagging", "worker"]]
    if SlackSettings.from_env().socket_mode:  # CHRONICLE_SLACK_SOCKET_MODE: events over Slack's WebSocket too
        workers.append(["slack", "socket-mode"])
    for args in workers:
        _background.append(subprocess.Popen([chronicle, *args], stdin=subprocess.DEVNULL))
        server.log.info("started background worker: chronicle %s (pid %s)", " ".join(args), _background[-1].pid)


def on_exit(server):
    for proc in _background:
        proc.terminate()
    for proc in _background:
        try:
            proc.wait(timeout=20)
        except Exception:  # noqa: BLE001 - still running after 20 s: stop it hard
            proc.kill()
