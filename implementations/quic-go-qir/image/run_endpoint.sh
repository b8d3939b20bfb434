#!/usr/bin/env bash
# ENTRYPOINT of quic-go-qir, after the QIR endpoint conventions: check the testcase (exit 127 for
# one this image does not do, before anything is touched), run /setup.sh, let a client wait for
# the simulator (/wait-for-it.sh sim:57832), then exec the project's quic-go harness with the
# QIR environment mapped onto its own (implementations/quic-go, docs/implementations.md):
#
#   TESTCASE transfer -> ALPN=hq-interop, http3 -> ALPN=h3
#   server: IP=:: (0.0.0.0 without IPv6), PORT=$PORT or 443, WWW=/www, CERTS=/certs (cert.pem, priv.key)
#   client: REQUESTS as given (the harness dials the URLs' host:port), CERTS=/certs (ca.pem),
#           DOWNLOADS=/downloads
#   both:   LOGS=/logs; SSLKEYLOGFILE, QLOGDIR, CIPHER, GSO, GODEBUG ... passed through
#           PARAM_FORCE_BUFFERS=0: run without CAP_NET_ADMIN (setpriv), as implementations/quic-go
set -euo pipefail

name=quic-go-qir
case "${TESTCASE:-}" in
  transfer) alpn=hq-interop ;;
  http3) alpn=h3 ;;
  *)
    echo "$name: unsupported testcase '${TESTCASE:-}' (it does: transfer, http3)" >&2
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

if [[ $role == server ]]; then
  bin=/usr/local/bin/quic-go-server
else
  bin=/usr/local/bin/quic-go-client
fi
# a missing program is a broken image (exit 1), not "unsupported" (exec would exit 127)
if [[ ! -x $bin ]]; then
  echo "$name: $bin is missing from the image" >&2
  exit 1
fi

# The simulator's network set-up (QIR convention). It needs CAP_NET_ADMIN and a QIR network;
# anywhere else it fails, which is no reason to stop.
if ! /setup.sh; then
  echo "$name: /setup.sh failed, going on" >&2
fi

export ALPN="$alpn" CERTS=/certs LOGS=/logs
if [[ -n ${QLOGDIR:-} ]]; then
  mkdir -p "$QLOGDIR"
fi
if [[ -n ${SSLKEYLOGFILE:-} ]]; then
  mkdir -p "$(dirname "$SSLKEYLOGFILE")"
fi

if [[ $role == server ]]; then
  ip="::"
  [[ -e /proc/net/if_inet6 ]] || ip=0.0.0.0
  export IP="$ip" PORT="${PORT:-443}" WWW=/www
  echo "$name: server ($ALPN) on [$IP]:$PORT serving $WWW" >&2
else
  export DOWNLOADS=/downloads
  if [[ -z ${REQUESTS:-} ]]; then
    echo "$name: REQUESTS is empty" >&2
    exit 1
  fi
  # Wait for the simulator to start up (QIR convention; the runner listens there).
  if ! /wait-for-it.sh sim:57832 -s -t 30; then
    echo "$name: sim:57832 did not answer within 30 s" >&2
    exit 1
  fi
  echo "$name: client ($ALPN) requests: $REQUESTS" >&2
fi

if [[ ${PARAM_FORCE_BUFFERS:-1} == 0 ]]; then
  exec setpriv --inh-caps=-net_admin --bounding-set=-net_admin -- "$bin"
fi
exec "$bin"
