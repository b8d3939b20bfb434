#!/usr/bin/env bash
# ENTRYPOINT of ngtcp2-trixie, after the QIR endpoint conventions: check the testcase (exit 127
# for one this image does not do, before anything is touched), run /setup.sh, let a client wait
# for the simulator (/wait-for-it.sh sim:57832), then run ngtcp2's HTTP/3 example programs from
# Debian trixie (ngtcp2 1.11: gtlsserver / gtlsclient, GnuTLS + nghttp3), options as in
# implementations/ngtcp2:
#
#   TESTCASE http3 only (Debian packages no hq-interop programs): transfer exits 127
#   server: gtlsserver '*' $PORT (443 if unset) /certs/priv.key /certs/cert.pem -d /www, a child
#           of this script (PID 1), which turns the runner's SIGTERM into the SIGINT it stops on
#   client: gtlsclient HOST PORT URL... per origin of REQUESTS, --download=/downloads
#   both:   -q, --cc=$CONGESTION_CONTROL, --ciphers= (GnuTLS priority) from CIPHER,
#           --qlog-dir=$QLOGDIR; SSLKEYLOGFILE is read by the programs themselves
#
# gtlsclient does not verify the server certificate against /certs/ca.pem (it has no option for
# a CA file), and does not exit non-zero on every failure: its output and the downloaded files
# are checked here; the runner's SHA-256 check catches a wrong body.
set -euo pipefail

name=ngtcp2-trixie
case "${TESTCASE:-}" in
  http3) ;;
  *)
    echo "$name: unsupported testcase '${TESTCASE:-}' (it does: http3)" >&2
    exit 127
    ;;
esac
role="${ROLE:-}"
case "$role" in
  server | client) ;;
  *)
    echo "$name: ROLE must be server or client, not '$role'" >&2
    exit 1
    ;;
esac

# a missing program is a broken image (exit 1), not "unsupported" (exec would exit 127)
prog=gtlsserver
[[ $role == server ]] || prog=gtlsclient
if ! command -v "$prog" >/dev/null; then
  echo "$name: $prog is missing from the image" >&2
  exit 1
fi

# The simulator's network set-up (QIR convention). It needs CAP_NET_ADMIN and a QIR network;
# anywhere else it fails, which is no reason to stop.
if ! /setup.sh; then
  echo "$name: /setup.sh failed, going on" >&2
fi

# -q: the default debug output prints every packet and frame (about 5x slower)
args=(-q)
cc="${CONGESTION_CONTROL:-cubic}"
case "$cc" in
  cubic | reno | bbr) ;;
  *) echo "$name: congestion control '$cc' not offered, using cubic" >&2; cc=cubic ;;
esac
args+=("--cc=$cc")
aead=""
case "${CIPHER:-}" in
  "") ;;
  TLS_AES_128_GCM_SHA256) aead=AES-128-GCM ;;
  TLS_AES_256_GCM_SHA384) aead=AES-256-GCM ;;
  TLS_CHACHA20_POLY1305_SHA256) aead=CHACHA20-POLY1305 ;;
  *) echo "$name: cipher '$CIPHER' not offered, using the default suites" >&2 ;;
esac
if [[ -n $aead ]]; then
  args+=("--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+$aead")
fi
if [[ -n ${QLOGDIR:-} ]]; then
  mkdir -p "$QLOGDIR"
  args+=("--qlog-dir=$QLOGDIR")
fi
if [[ -n ${SSLKEYLOGFILE:-} ]]; then
  mkdir -p "$(dirname "$SSLKEYLOGFILE")"
fi
# Generous flow-control windows (as implementations/ngtcp2), auto-tuned up to the maxima.
args+=(--max-data=32M --max-stream-data-bidi-local=16M --max-window=32M --max-stream-window=16M)

if [[ $role == server ]]; then
  port="${PORT:-443}"
  args+=(--max-stream-data-bidi-remote=16M --max-stream-data-uni=16M)
  # no /etc/mime.types in the image: every file is served without a content type
  args+=(-d /www --mime-types-file=/dev/null)
  echo "$name: gtlsserver on *:$port serving /www" >&2
  # Not exec'd: gtlsserver stops on SIGINT only, and as PID 1 of the container it would ignore
  # the runner's SIGTERM. This shell (PID 1) turns SIGTERM into SIGINT for it.
  gtlsserver "${args[@]}" '*' "$port" /certs/priv.key /certs/cert.pem &
  server=$!
  trap 'kill -INT "$server" 2>/dev/null || true' TERM INT
  rc=0
  wait "$server" || rc=$?
  # a trapped signal ends the first wait early: wait for the program itself
  if kill -0 "$server" 2>/dev/null; then
    rc=0
    wait "$server" || rc=$?
  fi
  # SIGINT is how it is stopped: that is a clean end
  if ((rc == 130 || rc == 143)); then
    rc=0
  fi
  exit "$rc"
fi

read -r -a urls <<<"${REQUESTS:-}"
if ((${#urls[@]} == 0)); then
  echo "$name: REQUESTS is empty" >&2
  exit 1
fi
# Wait for the simulator to start up (QIR convention; the runner listens there).
if ! /wait-for-it.sh sim:57832 -s -t 30; then
  echo "$name: sim:57832 did not answer within 30 s" >&2
  exit 1
fi
args+=(--exit-on-all-streams-close --download=/downloads)

# Group the URLs by origin (host:port), keeping their order: one connection per origin.
origins=()
declare -A by_origin=()
for url in "${urls[@]}"; do
  if [[ ! $url =~ ^https://(\[[^]]+\]|[^/:]+)(:([0-9]+))?(/.*)?$ ]]; then
    echo "$name: bad URL '$url'" >&2
    exit 1
  fi
  origin="${BASH_REMATCH[1]} ${BASH_REMATCH[3]:-443}"
  [[ -v "by_origin[$origin]" ]] || origins+=("$origin")
  by_origin[$origin]+="$url "
done

errlog="$(mktemp)"
child=""
trap 'rm -f "$errlog"' EXIT
trap '[[ -n $child ]] && kill -TERM "$child" 2>/dev/null; exit 143' TERM INT
for origin in "${origins[@]}"; do
  read -r host port <<<"$origin"
  host="${host#[}"
  host="${host%]}"
  read -r -a group <<<"${by_origin[$origin]}"
  files=()
  for url in "${group[@]}"; do
    path="${url#https://*/}"
    [[ $url == https://*/* ]] || path=""
    path="${path%%[?#]*}"
    file="${path##*/}"
    [[ -n $file ]] || file=index.html # what gtlsclient names it
    files+=("/downloads/$file")
  done
  rm -f -- "${files[@]}"
  echo "$name: gtlsclient $host $port ${group[*]}" >&2
  rc=0
  gtlsclient "${args[@]}" "$host" "$port" "${group[@]}" 2>"$errlog" &
  child=$!
  wait "$child" || rc=$?
  child=""
  cat "$errlog" >&2
  if ((rc != 0)); then
    echo "$name: gtlsclient exited with $rc" >&2
    exit 1
  fi
  if grep -q 'ERR_' "$errlog"; then
    echo "$name: the connection to $host:$port failed (see above)" >&2
    exit 1
  fi
  for f in "${files[@]}"; do
    if [[ ! -f $f ]]; then
      echo "$name: $f was not downloaded (connection failed?)" >&2
      exit 1
    fi
    echo "$name: $(stat -c %s -- "$f") bytes -> $f" >&2
  done
done
