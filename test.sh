#!/usr/bin/env bash
# Install what is missing, then run the whole test suite (unit + integration on the local
# namespace testbed). Usage, as root on Debian 12:  ./test.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
bash pos_scripts/install.sh --all
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests
