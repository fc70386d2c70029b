#!/usr/bin/env bash
# Install Synapse (the Matrix homeserver the channel tests run against) into its OWN virtualenv.
#
# Never into Palui's venv: Synapse's dependencies (Twisted, pydantic, cryptography, jsonschema…)
# would then be resolved together with Palui's and could move a Palui pin.
#
# Usage: install_synapse.sh [VENV]      (or SYNAPSE_VENV=…; default: ~/.cache/palui-tests/synapse-1.163.2)
# Prints the venv's python on stdout (the last line), for SYNAPSE_PYTHON:
#   export SYNAPSE_PYTHON="$(bash install_synapse.sh | tail -n1)"
#
# Idempotent and fast when already installed: a stamp (the SHA-256 of the pinned requirements)
# in the venv is compared, and nothing is downloaded when it matches (~0.1 s). Every package is
# pinned in synapse-requirements.txt (a `pip freeze` of a working install), so CI installs exactly
# what was tested. To move Synapse: change SYNAPSE_VERSION, install once without -r, freeze again.
set -euo pipefail

SYNAPSE_VERSION=1.163.2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/synapse-requirements.txt"
venv="${1:-${SYNAPSE_VENV:-$HOME/.cache/palui-tests/synapse-$SYNAPSE_VERSION}}"
python="${PYTHON:-python3}"

stamp="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$venv/.palui-stamp" && "$(cat "$venv/.palui-stamp")" == "$stamp" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

grep -qx "matrix-synapse==$SYNAPSE_VERSION" "$requirements" \
  || { echo "install_synapse.sh: $requirements does not pin matrix-synapse==$SYNAPSE_VERSION" >&2; exit 1; }

echo "installing matrix-synapse $SYNAPSE_VERSION into $venv" >&2
mkdir -p "$(dirname "$venv")"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
# without the e2e/postgres/redis extras: SQLite only, no libolm
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements" >&2
"$venv/bin/python" -c "import synapse, sys; assert synapse.__version__ == '$SYNAPSE_VERSION', synapse.__version__" >&2
echo "$stamp" > "$venv/.palui-stamp"
echo "$venv/bin/python"
