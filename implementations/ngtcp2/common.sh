# shellcheck shell=bash
# Shared by run-server and run-client: checks TESTCASE/ALPN (with ../_shared/sh/contract.sh) and
# maps the contract environment onto the options of ngtcp2's example programs (gtlsserver /
# gtlsclient, ngtcp2 0.12.1).

# shellcheck source=SCRIPTDIR/../_shared/sh/contract.sh
source "$(dirname "${BASH_SOURCE[0]}")/../_shared/sh/contract.sh"

# ngtcp2_check_case: exit 127 for a testcase or ALPN these programs do not do. Debian packages
# only the HTTP/3 programs (no h09gtlsserver/h09gtlsclient for hq-interop).
ngtcp2_check_case() {
  qir_check_case ngtcp2 h3
}

# ngtcp2_binary NAME: path of $SETUP_DIR/ngtcp2/bin/NAME; a missing program is exit 1 (not 127)
ngtcp2_binary() {
  : "${SETUP_DIR:?SETUP_DIR is not set}"
  local bin="$SETUP_DIR/ngtcp2/bin/$1"
  qir_require_exe ngtcp2 "$bin"
  printf '%s\n' "$bin"
}

# ngtcp2_common_args: fills the array NGTCP2_ARGS with the options both programs share
ngtcp2_common_args() {
  # -q: the default debug output prints every packet and frame (about 5x slower)
  NGTCP2_ARGS=(-q)

  local cc="${CONGESTION_CONTROL:-cubic}"
  case "$cc" in
    cubic | reno | bbr) ;;
    *) echo "ngtcp2: congestion control '$cc' not offered, using cubic" >&2; cc=cubic ;;
  esac
  NGTCP2_ARGS+=("--cc=$cc")

  # GnuTLS priority string: TLS 1.3 only, one AEAD (the programs' default enables all of them)
  local aead=""
  case "${CIPHER:-}" in
    "") ;;
    TLS_AES_128_GCM_SHA256) aead=AES-128-GCM ;;
    TLS_AES_256_GCM_SHA384) aead=AES-256-GCM ;;
    TLS_CHACHA20_POLY1305_SHA256) aead=CHACHA20-POLY1305 ;;
    *) echo "ngtcp2: cipher '$CIPHER' not offered, using the default suites" >&2 ;;
  esac
  if [[ -n $aead ]]; then
    NGTCP2_ARGS+=("--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+$aead")
  fi

  if [[ -n ${QLOGDIR:-} ]]; then
    mkdir -p "$QLOGDIR"
    NGTCP2_ARGS+=("--qlog-dir=$QLOGDIR")
  fi
  # SSLKEYLOGFILE: both programs open it themselves (NSS key log format)

  if [[ -n ${SOCKET_RCVBUF:-}${SOCKET_SNDBUF:-} ]]; then
    echo "ngtcp2: SOCKET_RCVBUF/SOCKET_SNDBUF ignored (the programs have no option for them)" >&2
  fi
  if [[ ${GRO:-1} == 0 ]]; then
    echo "ngtcp2: GRO=0 ignored (the programs never use GRO)" >&2
  fi
}

# ngtcp2_ack_args: appends the client's ACK frequency to NGTCP2_ARGS. ACK_RATIO=n is
# --ack-thresh=n (ngtcp2_settings.ack_thresh: ACK once n ack-eliciting packets arrived; the
# library caps it at 100). gtlsclient has no option for its ACK timer (min(25 ms, smoothed
# RTT / 8)), so MAX_ACK_DELAY_MS cannot be honoured: exit 127, like a ratio above 100.
ngtcp2_ack_args() {
  local ratio="${ACK_RATIO:-}"
  if [[ -n ${MAX_ACK_DELAY_MS:-} ]]; then
    echo "ngtcp2: unsupported MAX_ACK_DELAY_MS=$MAX_ACK_DELAY_MS (gtlsclient has no option for its ACK timer)" >&2
    exit 127
  fi
  [[ -n $ratio ]] || return 0
  if [[ ! $ratio =~ ^[0-9]+$ ]] || ((ratio < 1)); then
    echo "ngtcp2: ACK_RATIO must be a whole number >= 1, not '$ratio'" >&2
    exit 1
  fi
  if ((ratio > 100)); then
    echo "ngtcp2: unsupported ACK_RATIO=$ratio (ngtcp2 takes at most 100)" >&2
    exit 127
  fi
  NGTCP2_ARGS+=("--ack-thresh=$ratio")
}

# ngtcp2_window_args: appends the client's flow-control windows to NGTCP2_ARGS. By default
# generous ones, so a 10G link is not window limited: 16 MiB per stream, 32 MiB per connection,
# auto-tuned up to those (M is 2^20: util.cc parse_uint_iec). FLOW_CONTROL_WINDOW=n (bytes):
# n for the stream and the connection, as the initial credit and as the largest the auto-tuning
# may reach (--max-window, --max-stream-window), so the window stays n.
ngtcp2_window_args() {
  local window="${FLOW_CONTROL_WINDOW:-}"
  if [[ -z $window ]]; then
    NGTCP2_ARGS+=(--max-data=32M --max-stream-data-bidi-local=16M --max-window=32M
      --max-stream-window=16M)
    return 0
  fi
  if [[ ! $window =~ ^[0-9]+$ ]] || ((window < 1)); then
    echo "ngtcp2: FLOW_CONTROL_WINDOW must be a number of bytes above 0, not '$window'" >&2
    exit 1
  fi
  NGTCP2_ARGS+=("--max-data=$window" "--max-stream-data-bidi-local=$window"
    "--max-window=$window" "--max-stream-window=$window")
}
