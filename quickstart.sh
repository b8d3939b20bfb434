#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine, as root: install what the campaign needs
# (pos_scripts/install.sh --for CONFIG), bring up the local namespace testbed, build its
# implementations, run configs/local.yml and print the table; then install what later steps
# need (the notebook tools, install.sh --notebook). The testbed is taken down at the end
# (KEEP_TESTBED=1 keeps it).
# Usage: ./quickstart.sh [CONFIG] [run.py run options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
start=$(date +%s)
config=${1:-configs/local.yml}
shift || true
bash pos_scripts/install.sh --for "$config"
py=.venv/bin/python
if [[ ${KEEP_TESTBED:-0} != 1 ]]; then
  trap '"$py" run.py testbed down >/dev/null || true' EXIT
fi
"$py" run.py testbed up
"$py" run.py run "$config" "$@"
echo "[quickstart] the table after $(($(date +%s) - start)) s; now the notebook tools (JupyterLab)" >&2
bash pos_scripts/install.sh --notebook
echo "[quickstart] done: open the results with ./run.py notebooks results/<campaign>" >&2
