#!/usr/bin/env bash
# Fuzz the JSON API of a live `palui serve` with Schemathesis over its OpenAPI document (spec §8.1).
#
# Usage: scripts/run_schemathesis.sh [SCRATCH_DIR] [-- SCHEMATHESIS_OPTIONS...]
#
#   SCRATCH_DIR   where the throw-away PALUI_HOME, the service's output and the reports go
#                 (default: a new temp dir); nothing is written into the repository.
#   PYTHON        the interpreter with Palui and the test extra installed (default: .venv/bin/python
#                 of this checkout).
#
# It starts `palui serve --port 0` in a fresh home whose model is a `script:` model (a call of
# recall__forget_memory, destructive so it asks, then a text answer: turns end, and some wait for an
# approval the stateful phase can answer), with a clean environment (no model key, so no turn reaches a
# network) and one job,
# and runs `schemathesis run` over every operation of /api/openapi.json with the access token:
# examples, coverage, fuzzing and the stateful phase (the document's links), these checks:
# not_a_server_error, status_code_conformance, response_schema_conformance,
# content_type_conformance, negative_data_rejection, ignored_auth; --max-time 150,
# --request-timeout 5. Excluded: the long-poll GET /api/approvals/{id}/wait and the followed stream
# GET /api/turns/{turn}/events (both wait for a turn, longer than a request may take); /hooks/... is
# not in the document (a webhook sender's own format). The NDJSON answers of the other streamed
# routes end with their turn; Schemathesis checks their status and content type.
# After the run the service's terminal output must hold no traceback (errors go to logs/palui.log).
# .ci/run runs it after pytest. Exit status: 0 when there was no failure, 1 otherwise.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then scratch="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
scratch="${scratch:-$(mktemp -d -t palui-schemathesis.XXXXXX)}"
mkdir -p "$scratch"
scratch="$(cd "$scratch" && pwd)"
PYTHON="${PYTHON:-$repo/.venv/bin/python}"
# An interpreter given relative to the current directory (.ci/run passes .venv/bin/python) still works after the
# `cd` below: make it absolute, without resolving the venv's symlink (its site-packages are found through it).
case "$PYTHON" in /*) ;; */*) PYTHON="$PWD/$PYTHON" ;; esac
st="$(dirname "$PYTHON")/schemathesis"
[ -x "$st" ] || { echo "run_schemathesis.sh: no schemathesis next to $PYTHON (pip install -e '.[test]')" >&2; exit 2; }

home="$scratch/home"
rm -rf "$home" "$scratch/report"
mkdir -p "$home"
cat > "$scratch/script.json" <<'EOF'
{"steps": [{"tool_calls": [{"tool": "recall__forget_memory", "args": {"id": 1}}]},
           {"text": "Done."}]}
EOF
printf 'model = "script:%s"\n' "$scratch/script.json" > "$home/palui.toml"
clean=(env -i PATH="$PATH" HOME="$scratch" LANG=C.UTF-8 PALUI_HOME="$home" PALUI_TICK_SECONDS=0.2)
# A job, so POST /api/jobs/{name}/run has one to run (the stateful phase finds it through GET /api/jobs).
"${clean[@]}" "$PYTHON" -m palui jobs add nightly --cron "0 3 * * *" --prompt "tidy up" > /dev/null

"${clean[@]}" "$PYTHON" -m palui serve --port 0 > "$scratch/serve.out" 2>&1 &
pid=$!
stop_service() {
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
trap stop_service EXIT

port=""
for _ in $(seq 1 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "run_schemathesis.sh: palui serve exited:" >&2; cat "$scratch/serve.out" >&2; exit 1
    fi
    port="$("$PYTHON" -c 'import json, sys
try:
    info = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    info = {}
print(info.get("port", "") if info.get("pid") == int(sys.argv[2]) else "")' "$home/serve.json" "$pid")"
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "run_schemathesis.sh: palui serve did not start" >&2; exit 1; }
token="$(cat "$home/access_token")"

status=0
(cd "$scratch" && "$st" run "http://127.0.0.1:$port/api/openapi.json" \
    -H "Authorization: Bearer $token" \
    --checks not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance,negative_data_rejection,ignored_auth \
    --max-time 150 --request-timeout 5 --wait-for-schema 30 \
    --exclude-path '/api/approvals/{id}/wait' --exclude-path '/api/turns/{turn}/events' \
    --report junit --report-dir "$scratch/report" "$@") || status=1

stop_service
trap - EXIT
if grep -q "Traceback" "$scratch/serve.out"; then
    echo "run_schemathesis.sh: a traceback reached the service's terminal:" >&2
    cat "$scratch/serve.out" >&2
    status=1
fi
if [ -f "$home/logs/palui.log" ] && grep -q "unexpected error" "$home/logs/palui.log"; then
    echo "run_schemathesis.sh: the service logged unexpected errors ($home/logs/palui.log)" >&2
    status=1
fi
echo "run_schemathesis.sh: $([ "$status" -eq 0 ] && echo "0 failures" || echo "FAILED") (reports in $scratch)"
exit "$status"
