#!/usr/bin/env bash
# Fuzzes the daemon's REST API from its own OpenAPI document with
# schemathesis (PyPI): starts `sluice daemon` on a temporary socket and
# state directory with a TCP listener, applies the quickstart so names
# resolve and counters move, lets schemathesis send generated valid and
# invalid requests to every operation for a bounded time, and fails on any
# 5xx or if the daemon does not survive.
#
#   scripts/api-fuzz.sh                 # builds sluice (debug) first
#   SLUICE_BIN=path/to/sluice scripts/api-fuzz.sh
#   API_FUZZ_TIME=60 API_FUZZ_EXAMPLES=50 API_FUZZ_SEED=1 scripts/api-fuzz.sh
#
# Without schemathesis (`pip install schemathesis`) it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v st >/dev/null 2>&1 || ! st --version >/dev/null 2>&1; then
  echo "note: schemathesis is not installed (pip install schemathesis); skipping the API fuzzing"
  exit 0
fi
if ! command -v curl >/dev/null 2>&1; then
  echo "note: curl is not installed; skipping the API fuzzing"
  exit 0
fi

time_budget=${API_FUZZ_TIME:-75}
examples=${API_FUZZ_EXAMPLES:-60}
bin=${SLUICE_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q -p sluice-cli
  bin="${CARGO_TARGET_DIR:-target}/debug/sluice"
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/sluice-api-fuzz.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

sock="$dir/sluice.sock"
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$token" >"$dir/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" daemon --socket "$sock" --state-dir "$dir/state" \
  --listen "127.0.0.1:$port" --token-file "$dir/token" </dev/null >"$dir/daemon.log" 2>&1 &
pid=$!

alive() {
  kill -0 "$pid" 2>/dev/null &&
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$sock" http://sluice/v1/version)" = 200 ]
}
for _ in $(seq 300); do alive && break; sleep 0.1; done
if ! alive; then
  echo "error: the daemon did not start:"; cat "$dir/daemon.log"; exit 1
fi

# The quickstart as the desired state: the fuzzer's GETs then find ports,
# NFs and chains, and its DELETEs remove real ones.
python3 -c 'import json, sys; print(json.dumps({"spec": open(sys.argv[1]).read(), "source": sys.argv[1]}))' \
  "$PWD/examples/quickstart.yaml" >"$dir/apply.json"
code=$(curl -s -o "$dir/apply.out" -w '%{http_code}' --unix-socket "$sock" -X PUT \
  -H 'content-type: application/json' --data-binary @"$dir/apply.json" http://sluice/v1/spec)
if [ "$code" != 200 ]; then
  echo "error: applying the quickstart answered $code:"; cat "$dir/apply.out"; exit 1
fi

seed_args=()
if [ -n "${API_FUZZ_SEED:-}" ]; then seed_args=(--seed "$API_FUZZ_SEED"); fi
echo "== schemathesis: every operation of /v1/openapi.json, at most $examples examples each, ${time_budget}s"
status=0
# not_a_server_error: no 5xx, whatever the request; the others hold the
# answers to the document: documented status codes, content types and
# response schemas.
# From the temporary directory, so schemathesis's caches stay out of the
# work tree.
(cd "$dir" && st run "http://127.0.0.1:$port/v1/openapi.json" \
  -H "Authorization: Bearer $token" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "$examples" --max-time "$time_budget" \
  --phases examples,coverage,fuzzing \
  --request-timeout 20 --workers 1 --no-color \
  --suppress-health-check all --generation-database none \
  --report junit --report-dir "$dir/report" \
  "${seed_args[@]}") || status=$?

if ! alive; then
  echo "error: the daemon died or stopped answering during the fuzzing; its log:"
  tail -n 50 "$dir/daemon.log"
  exit 1
fi
if grep -q '^thread .* panicked' "$dir/daemon.log"; then
  echo "error: the daemon panicked during the fuzzing:"
  grep -A5 'panicked' "$dir/daemon.log" | head -40
  exit 1
fi
if [ "$status" != 0 ]; then
  echo "error: schemathesis found failures (exit $status); the daemon's log:"
  tail -n 30 "$dir/daemon.log"
  exit "$status"
fi
echo "api-fuzz: no failures; the daemon survived"
