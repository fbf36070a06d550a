#!/usr/bin/env bash
# The demo in one command, from a fresh clone: a virtual environment with sleuth and its demo
# extra (the analytics service and a CPU torch, at the versions of constraints.txt) when there is
# none yet, then `sleuth demo`.
#
#   bash deploy/demo.sh                  # embedded (no services), or the stack when `sleuth stack up` runs
#   bash deploy/demo.sh --mode stack     # insist on the stack; --out DIR, --no-emulated: see `sleuth demo -h`
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ ! -x .venv/bin/sleuth ]]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[demo]'
fi
exec .venv/bin/sleuth demo "$@"
