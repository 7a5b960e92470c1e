#!/usr/bin/env bash
# Chronicle's one-command set-up. Idempotent: a second run reuses the virtualenv, the fetched Cassandra
# and the running node.
#
#   bash bootstrap.sh serve   # install, start Cassandra, migrate, load sample data, serve the API (gunicorn);
#                             # secrets generated once into .chronicle/secrets.env
#   bash bootstrap.sh test    # install, start Cassandra, run the whole test suite (extra args go to pytest)
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3.11}
VENV=.venv
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }

ensure_system_tools() {
  local missing=()
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  # Browser tests drive Debian's Chromium with Playwright (no browser download is possible offline).
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  # Emoji in the archive pages' screenshots (reactions, :shortcodes:); pages work without it, so only as root.
  if [ ! -f /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] && [ "$(id -u)" = 0 ]; then
    missing+=(fonts-noto-color-emoji)
  fi
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found: Chronicle needs Python 3.11 (set PYTHON=/path/to/python3.11)"
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing ${missing[*]} with apt-get"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      die "missing ${missing[*]}: install Java 17, Maven (Cassandra is fetched with Maven) and Chromium (browser tests)"
    fi
  fi
}

ensure_venv() {
  # Reinstall only when pyproject.toml changed since the last install.
  local stamp="$VENV/.chronicle-installed" want
  want=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtualenv $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing Python dependencies"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e '.[dev]'
    echo "$want" > "$stamp"
  fi
}

start_cassandra() {
  "$VENV/bin/chronicle" node start
}

# `serve`'s secrets: generated once (random) into the state folder, mode 0600, printed when created, then reused;
# a variable already set in the environment wins. No published default secret is ever used (docs/deployment.md).
ensure_local_secrets() {
  local dir=${CHRONICLE_STATE_DIR:-.chronicle} file key value
  file="$dir/secrets.env"
  if [ ! -s "$file" ]; then
    mkdir -p "$dir"
    local read_token admin_token
    read_token=$(random_secret); admin_token=$(random_secret)
    (
      umask 077
      {
        echo "# Chronicle's local secrets, generated once by 'bash bootstrap.sh serve' (docs/deployment.md#secrets)."
        echo "CHRONICLE_CURSOR_SECRET=$(random_secret)"
        echo "CHRONICLE_SLACK_SIGNING_SECRET=$(random_secret)"
        echo "CHRONICLE_ADMIN_TOKEN=$admin_token"
        echo "CHRONICLE_API_TOKENS={\"$read_token\": {\"workspaces\": [\"*\"], \"private\": true}}"
      } > "$file.tmp"
      printf '%s\n' "$read_token" > "$dir/read-token"
      printf '%s\n' "$admin_token" > "$dir/admin-token"
      mv "$file.tmp" "$file"
    )
    say "generated local secrets in $file (mode 0600; read token in $dir/read-token, admin token in $dir/admin-token):"
    sed 's/^/    /' "$file"
  fi
  chmod 600 "$file" "$dir/read-token" "$dir/admin-token" 2>/dev/null || true
  while IFS= read -r line; do
    case "$line" in ''|'#'*) continue ;; esac
    key=${line%%=*}; value=${line#*=}
    [ -n "${!key:-}" ] || export "$key=$value"
  done < "$file"
}

random_secret() {
  "$VENV/bin/python" -c 'import secrets; print(secrets.token_urlsafe(32))'
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  serve)
    ensure_system_tools; ensure_venv; start_cassandra
    "$VENV/bin/chronicle" migrate
    "$VENV/bin/chronicle" sample load
    # Local secrets generated once under .chronicle/ unless the environment sets real ones (README
    # "Configuration"); development mode, unless the environment says otherwise.
    ensure_local_secrets
    export CHRONICLE_ENV=${CHRONICLE_ENV:-development}
    # The network job worker and the Slack file worker run beside gunicorn (gunicorn.conf.py starts and stops them).
    export CHRONICLE_BACKGROUND_WORKERS=${CHRONICLE_BACKGROUND_WORKERS:-1}
    say "serving on http://${CHRONICLE_BIND:-127.0.0.1:8080}/ (the front door; OpenAPI UI at /docs); Ctrl-C stops it"
    say "to install into a Slack workspace: chronicle slack manifest --url https://<your host>, then docs/slack-app.md"
    exec "$VENV/bin/gunicorn" -c gunicorn.conf.py api.wsgi:app
    ;;
  test)
    ensure_system_tools; ensure_venv
    # The suite builds its own settings and secrets (tests/conftest.py); gunicorn instances it starts inherit this.
    export CHRONICLE_ENV=development
    if [ "${CI:-}" = "true" ]; then
      # CI leaves nothing running behind it, whatever happens below.
      trap '"$VENV/bin/chronicle" node stop || true' EXIT
    fi
    start_cassandra
    "$VENV/bin/ruff" check .
    set +e
    "$VENV/bin/python" -m pytest "$@"
    status=$?
    set -e
    # pytest exits 5 when it collected no test: for CI that is a failure, not a pass.
    [ $status -eq 5 ] && die "pytest collected no tests"
    exit $status
    ;;
  *)
    echo "usage: bash bootstrap.sh serve|test [pytest args]" >&2
    exit 2
    ;;
esac
