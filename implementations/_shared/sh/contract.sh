# shellcheck shell=bash
# The script contract every run-server/run-client follows (docs/implementations.md), sourced by
# them from <implementations>/_shared/sh/ (meta.yml `shared: [sh]` makes the runner upload it):
# exit 127 means "unsupported" (this testcase or protocol), anything else that goes wrong is a
# failure (exit 1), also a missing build. A run script that cannot find this file exits 1, too
# (`source` of a missing file fails, and `set -e` ends the script with that status).

# qir_check_case NAME ALPN...: exit 127 unless TESTCASE is goodput and ALPN is empty or one of
# the ALPNs listed (the protocols of meta.yml `alpns`).
qir_check_case() {
  local name=$1 alpn="${ALPN:-}" a
  shift
  case "${TESTCASE:-}" in
    goodput) ;;
    *) echo "$name: unsupported testcase '${TESTCASE:-}'" >&2; exit 127 ;;
  esac
  [[ -n $alpn ]] || return 0
  for a in "$@"; do
    [[ $alpn != "$a" ]] || return 0
  done
  echo "$name: unsupported ALPN '$alpn' (it speaks: $*)" >&2
  exit 127
}

# qir_require_exe NAME PATH: exit 1 (a failure, not 127 "unsupported") when PATH, something
# setup builds or installs, is not there.
qir_require_exe() {
  if [[ ! -x $2 ]]; then
    echo "$1: $2 not found, run setup first" >&2
    exit 1
  fi
}

# qir_run_setup_bin NAME ROLE ALPN...: the whole run-server/run-client of a harness that setup
# built into $SETUP_DIR/NAME/bin/{server,client} (the Rust ones): check TESTCASE and ALPN, then
# exec the binary for ROLE (exec: it keeps the script's PID for the runner's monitors).
qir_run_setup_bin() {
  local name=$1 role=$2
  shift 2
  case "$role" in
    server | client) ;;
    *) echo "$name: qir_run_setup_bin: role must be server or client, not '$role'" >&2; exit 1 ;;
  esac
  qir_check_case "$name" "$@"
  : "${SETUP_DIR:?SETUP_DIR is not set}"
  local bin="$SETUP_DIR/$name/bin/$role"
  qir_require_exe "$name" "$bin"
  exec "$bin"
}

# qir_check_workload NAME KIND...: exit 127 unless WORKLOAD (empty: download) is one of the
# KINDs this harness runs (download, upload, bidirectional; meta.yml `workloads.kinds`), and
# STREAMS and CONNECTIONS (empty: 1) are whole numbers of at least 1.
qir_check_workload() {
  local name=$1 kind="${WORKLOAD:-download}" k n
  shift
  for n in "${STREAMS:-1}" "${CONNECTIONS:-1}"; do
    if [[ ! $n =~ ^[1-9][0-9]*$ ]]; then
      echo "$name: STREAMS and CONNECTIONS must be whole numbers >= 1, not '$n'" >&2
      exit 1
    fi
  done
  for k in "$@"; do
    [[ $kind != "$k" ]] || return 0
  done
  echo "$name: unsupported workload '$kind' (it runs: $*)" >&2
  exit 127
}
