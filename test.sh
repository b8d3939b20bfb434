#!/usr/bin/env bash
# Install what is missing, then run the test suite. As root on Debian 12:
#
#   ./test.sh                 the whole suite: the unit tests and the testbed tests (the local
#                             namespace testbed); what CI runs (.ci/run)
#   ./test.sh --quick         the fast tier, what to run on every edit: every test not marked
#                             `testbed` (pytest -m "not testbed"), in two workers
#   ./test.sh --serial        the whole suite in one pytest process, one test at a time
#   ./test.sh [OPTION] ARGS   more pytest arguments (-k EXPR, -x, ...), given to every run
#
# The whole suite is two pytest runs at once: the testbed tests (-m testbed) in file order,
# since they share the one testbed and mostly wait on timers (path RTTs, durations, timeouts),
# and beside them the unit tests (-m "not testbed"), whose output follows when the testbed
# run ends. Each prints its ten slowest tests, and then the ten slowest of the suite
# (docs/testing.md keeps the table). The exit status is non-zero when either run fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
mode=both
case ${1:-} in
  --quick) mode=quick; shift ;;
  --serial) mode=serial; shift ;;
esac
bash pos_scripts/install.sh --all
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider --durations=10)
case $mode in
  quick) exec "${pytest[@]}" -n 2 --dist worksteal -m "not testbed" "$@" tests ;;
  serial) exec "${pytest[@]}" "$@" tests ;;
esac

units_log=$(mktemp --tmpdir qir-unit-tests.XXXXXX.log)
testbed_log=$(mktemp --tmpdir qir-testbed-tests.XXXXXX.log)
start=$(date +%s)
# the unit run at a lower priority: the testbed run is the critical path, and its transfers,
# calibrations and builds are what the CPU should go to first
nice -n 10 "${pytest[@]}" -p no:xdist -m "not testbed" "$@" tests >"$units_log" 2>&1 &
units=$!
# on every exit the logs go; after Ctrl-C or a failure here the unit run too (pytest cleans
# up after a SIGINT); once it has been waited for, its PID is forgotten (it may be reused)
cleanup() {
  if [[ -n $units ]]; then
    kill -INT "$units" 2>/dev/null || true
    wait "$units" 2>/dev/null || true
  fi
  rm -f "$units_log" "$testbed_log"
}
trap cleanup EXIT
status=0
"${pytest[@]}" -p no:xdist -m testbed "$@" tests 2>&1 | tee "$testbed_log" || status=$?
units_status=0
wait "$units" || units_status=$?
units=
echo "=== the unit tests (-m \"not testbed\"), run beside the testbed tests ==="
cat "$units_log"
echo "=== the ten slowest tests of the suite ==="
grep -hE '^[0-9.]+s (setup|call|teardown) ' "$testbed_log" "$units_log" | sort -rn | head -10 || true
echo "=== the whole suite: $(($(date +%s) - start)) s; testbed run exit $status, unit run exit $units_status ==="
# pytest's 5 (nothing collected, e.g. -k matched only one kind) is not a failure of the other
for s in "$status" "$units_status"; do
  ((s == 0 || s == 5)) || exit "$s"
done
((status == 0 || units_status == 0)) || exit "$status"
