#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine, as root: install what is missing, build the
# implementations, bring up the local namespace testbed, run configs/local.yml and print the
# table. The testbed is taken down at the end (KEEP_TESTBED=1 keeps it).
# Usage: ./quickstart.sh [CONFIG] [run.py run options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
bash pos_scripts/install.sh
config=${1:-configs/local.yml}
shift || true
py=.venv/bin/python
if [[ ${KEEP_TESTBED:-0} != 1 ]]; then
  trap '"$py" run.py testbed down >/dev/null || true' EXIT
fi
"$py" run.py testbed up
"$py" run.py run "$config" "$@"
