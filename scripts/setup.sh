#!/usr/bin/env bash
# Create .venv (if missing) and install uvmsim into it with the given extras.
# Usage: scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
# quiet, but say what is happening: installs take a minute on a fresh machine
echo "installing uvmsim${extras:+[$extras]} into .venv ..." >&2
.venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
