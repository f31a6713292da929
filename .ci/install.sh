#!/usr/bin/env bash
# Installs what CI needs beyond the Rust toolchain and Python, unless it is
# already there: Debian's Chromium and its WebDriver for the dashboard browser
# test (tests/api/dashboard_browser.rs), iproute2 for the network namespace
# that .ci/schemathesis.sh fuzzes in, PostgreSQL for the tests of the
# PostgreSQL engine, and tinyproxy for the egress-proxy tests (each test
# starts its own on a loopback port). Then starts PostgreSQL with pg_stat_statements loaded
# (the load tool counts statements per event with it) and creates the role
# the tests use (ROLECALL_TEST_POSTGRES_URL in .ci/run), which may create
# databases: each test makes its own, and which may log in through the Unix
# socket with its password.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
[[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
command -v ip >/dev/null || missing+=(iproute2)
command -v unshare >/dev/null || missing+=(util-linux)
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
command -v tinyproxy >/dev/null || missing+=(tinyproxy)
command -v python3 >/dev/null || missing+=(python3)
# tikv-jemalloc-sys builds jemalloc with its configure script and make.
command -v make >/dev/null || missing+=(make)
command -v npm >/dev/null || missing+=(nodejs npm)
python3 -c "import ensurepip" 2>/dev/null || missing+=(python3-venv)
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [[ "$(id -u)" -ne 0 ]]; then
  SUDO="sudo"
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  $SUDO apt-get update
  $SUDO apt-get install -y "${missing[@]}"
fi

# The newest installed PostgreSQL, its cluster created if the package did not.
version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$version main"; then
  $SUDO pg_createcluster "$version" main
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $4}' | grep -qx online; then
  $SUDO pg_ctlcluster "$version" main start
fi
wait_ready() {
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 && return 0
    sleep 1
  done
}
wait_ready
as_postgres() {
  if [[ "$(id -u)" -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    sudo -u postgres "$@"
  fi
}
# pg_stat_statements, in every database made from template1 from now on.
if [[ "$(as_postgres psql -Atc 'SHOW shared_preload_libraries')" != *pg_stat_statements* ]]; then
  as_postgres psql -q -v ON_ERROR_STOP=1 -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
  $SUDO pg_ctlcluster "$version" main restart
  wait_ready
fi
as_postgres psql -q -d template1 -v ON_ERROR_STOP=1 -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
as_postgres psql -q -v ON_ERROR_STOP=1 -c "
  DO \$\$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'rolecall') THEN
      CREATE ROLE rolecall LOGIN CREATEDB PASSWORD 'rolecall';
    END IF;
  END \$\$;"
# The same role through the Unix socket, with its password (Debian allows
# only peer authentication there): a node on the database's machine
# connects that way (tests/api/postgres.rs).
hba=$(as_postgres psql -Atc 'SHOW hba_file')
if ! as_postgres grep -qx 'local all rolecall scram-sha-256' "$hba"; then
  as_postgres sed -i '1i local all rolecall scram-sha-256' "$hba"
  as_postgres psql -qAt -v ON_ERROR_STOP=1 -c 'SELECT pg_reload_conf()' >/dev/null
fi

# The README's Python subscriber is tested with the Standard Webhooks and Svix
# libraries (tests/api/subscriber_python.rs), in a venv of their own.
SUBSCRIBER_VENV=target/subscriber-venv
if ! "$SUBSCRIBER_VENV/bin/python3" -c "import standardwebhooks, svix" 2>/dev/null; then
  rm -rf "$SUBSCRIBER_VENV"
  python3 -m venv "$SUBSCRIBER_VENV"
  "$SUBSCRIBER_VENV/bin/pip" install --quiet --disable-pip-version-check \
    "standardwebhooks==1.1.0" "svix==2.9.1"
fi

# The OpenAPI gate (tests/api/openapi_lint.rs): openapi-spec-validator in a
# venv of its own and Redocly's CLI (1.34, which runs on Debian's Node.js
# 18 as well as on newer ones); and openapi-python-client, with what the
# client it generates imports, for tests/api/openapi_client.rs. All under
# target/openapi-tools.
OPENAPI_TOOLS=target/openapi-tools
if ! "$OPENAPI_TOOLS/venv/bin/openapi-spec-validator" --help >/dev/null 2>&1; then
  rm -rf "$OPENAPI_TOOLS/venv"
  python3 -m venv "$OPENAPI_TOOLS/venv"
  "$OPENAPI_TOOLS/venv/bin/pip" install --quiet --disable-pip-version-check \
    "openapi-spec-validator==0.9.0"
fi
if [[ "$("$OPENAPI_TOOLS/redocly/node_modules/.bin/redocly" --version 2>/dev/null)" != "1.34.20" ]]; then
  rm -rf "$OPENAPI_TOOLS/redocly"
  npm install --prefix "$OPENAPI_TOOLS/redocly" --no-audit --no-fund --silent "@redocly/cli@1.34.20"
fi
if ! "$OPENAPI_TOOLS/client-venv/bin/openapi-python-client" --version 2>/dev/null | grep -q "0.29.1" \
  || ! "$OPENAPI_TOOLS/client-venv/bin/python" -c "import dateutil" 2>/dev/null; then
  rm -rf "$OPENAPI_TOOLS/client-venv"
  python3 -m venv "$OPENAPI_TOOLS/client-venv"
  "$OPENAPI_TOOLS/client-venv/bin/pip" install --quiet --disable-pip-version-check \
    "openapi-python-client==0.29.1" "python-dateutil==2.9.0.post0"
fi
