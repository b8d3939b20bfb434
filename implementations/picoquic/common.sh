# shellcheck shell=bash
# Shared by run-server and run-client: checks TESTCASE/ALPN (with ../_shared/sh/contract.sh) and
# maps the contract environment onto the options of picoquic's demo program picoquicdemo
# (picoquicfirst/picoquicdemo.c and picoquic/config.c of the pinned commit; setup builds it).

# shellcheck source=SCRIPTDIR/../_shared/sh/contract.sh
source "$(dirname "${BASH_SOURCE[0]}")/../_shared/sh/contract.sh"

# picoquic_check_case: exit 127 for a testcase or ALPN picoquicdemo does not do.
picoquic_check_case() {
  qir_check_case picoquic h3 hq-interop
}

# picoquic_binary: path of $SETUP_DIR/picoquic/bin/picoquicdemo; a missing build is exit 1
picoquic_binary() {
  : "${SETUP_DIR:?SETUP_DIR is not set}"
  local bin="$SETUP_DIR/picoquic/bin/picoquicdemo"
  qir_require_exe picoquic "$bin"
  printf '%s\n' "$bin"
}

# picoquic_common_args: fills the array PICOQUIC_ARGS with the options both roles share
picoquic_common_args() {
  PICOQUIC_ARGS=()

  # -G: picoquicdemo's default is bbr; the contract's default is cubic. picoquic also offers
  # dcubic, fast, prague, bbr1 (BBRv1) and c4; its "bbr" is its BBRv3-style BBR.
  local cc="${CONGESTION_CONTROL:-cubic}" algo
  case "$cc" in
    cubic) algo=cubic ;;
    reno) algo=newreno ;;
    bbr) algo=bbr ;;
    *) echo "picoquic: congestion control '$cc' not offered, using cubic" >&2; algo=cubic ;;
  esac
  PICOQUIC_ARGS+=(-G "$algo")

  # -C: one TLS 1.3 suite (picoquic_set_cipher_suite; config.c maps 128/256/20 to the IANA
  # codes 0x1301/0x1302/0x1303). Without it all three are offered/accepted.
  case "${CIPHER:-}" in
    "") ;;
    TLS_AES_128_GCM_SHA256) PICOQUIC_ARGS+=(-C 128) ;;
    TLS_AES_256_GCM_SHA384) PICOQUIC_ARGS+=(-C 256) ;;
    TLS_CHACHA20_POLY1305_SHA256) PICOQUIC_ARGS+=(-C 20) ;;
    *) echo "picoquic: cipher '$CIPHER' not offered, using the default suites" >&2 ;;
  esac

  if [[ -n ${QLOGDIR:-} ]]; then
    mkdir -p "$QLOGDIR"
    PICOQUIC_ARGS+=(-q "$QLOGDIR")
  fi
  # -8: the library then writes the keys to the file named by SSLKEYLOGFILE (NSS format,
  # appended); without -8 it ignores SSLKEYLOGFILE.
  if [[ -n ${SSLKEYLOGFILE:-} ]]; then
    PICOQUIC_ARGS+=(-8)
  fi

  # -B sets SO_SNDBUF and SO_RCVBUF of the UDP sockets to one value.
  local rcv="${SOCKET_RCVBUF:-}" snd="${SOCKET_SNDBUF:-}" size
  if [[ ! $rcv =~ ^[0-9]*$ || ! $snd =~ ^[0-9]*$ ]]; then
    echo "picoquic: SOCKET_RCVBUF/SOCKET_SNDBUF must be sizes in bytes ('$rcv', '$snd')" >&2
    exit 1
  fi
  if [[ -n $rcv$snd ]]; then
    size=$((${rcv:-0} > ${snd:-0} ? ${rcv:-0} : ${snd:-0}))
    if [[ $rcv != "$snd" ]]; then
      echo "picoquic: one size for both socket buffers (-B): SO_RCVBUF and SO_SNDBUF = $size" \
        "(asked: SOCKET_RCVBUF=${rcv:-default}, SOCKET_SNDBUF=${snd:-default})" >&2
    fi
    PICOQUIC_ARGS+=(-B "$size")
  fi
  # -0: no UDP GSO (sendmsg with UDP_SEGMENT); picoquic uses it by default where the kernel has it
  if [[ ${GSO:-1} == 0 ]]; then
    PICOQUIC_ARGS+=(-0)
  fi
  if [[ ${GRO:-1} == 0 ]]; then
    echo "picoquic: GRO=0 ignored (picoquic never uses UDP GRO on Linux)" >&2
  fi
}
