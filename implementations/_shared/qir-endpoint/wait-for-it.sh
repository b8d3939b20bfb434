#!/usr/bin/env bash
# /wait-for-it.sh of the QUIC Interop Runner's endpoint image: waits until a TCP port accepts
# connections. Written for this project with the command line of the wait-for-it.sh that QIR's
# endpoint image ships, which its images call as
#
#   /wait-for-it.sh sim:57832 -s -t 30
#
# (the client waits for the network simulator). Usage:
#   wait-for-it.sh HOST:PORT [-s|--strict] [-q|--quiet] [-t SECONDS|--timeout=SECONDS] [-- COMMAND ARGS...]
#   wait-for-it.sh -h HOST -p PORT ...  (also --host=HOST --port=PORT)
# -t 0 waits forever (default: 15 s). Exit status: 0 once the port accepts a connection, 124
# after the timeout. With a COMMAND it is run (exec) afterwards; with -s only if the port was
# reached, else the status is 124. The test is a TCP connect through bash's /dev/tcp, each try
# limited to 1 s.
set -euo pipefail

prog=${0##*/}
host="" port="" strict=0 quiet=0 timeout=15
cmd=()

usage() {
  cat >&2 <<USAGE
usage: $prog HOST:PORT [-s|--strict] [-q|--quiet] [-t SECONDS] [-- COMMAND ARGS...]
       $prog -h HOST -p PORT [-s] [-q] [-t SECONDS] [-- COMMAND ARGS...]
USAGE
  exit 1
}

say() {
  ((quiet)) || printf '%s: %s\n' "$prog" "$*" >&2
}

while (($#)); do
  case "$1" in
    *:*)
      [[ $1 != -* ]] || usage
      host=${1%:*}
      port=${1##*:}
      shift
      ;;
    -s | --strict) strict=1; shift ;;
    -q | --quiet) quiet=1; shift ;;
    -h) (($# >= 2)) || usage; host=$2; shift 2 ;;
    --host=*) host=${1#--host=}; shift ;;
    -p) (($# >= 2)) || usage; port=$2; shift 2 ;;
    --port=*) port=${1#--port=}; shift ;;
    -t) (($# >= 2)) || usage; timeout=$2; shift 2 ;;
    --timeout=*) timeout=${1#--timeout=}; shift ;;
    --) shift; cmd=("$@"); break ;;
    --help) usage ;;
    *) printf '%s: unknown argument: %s\n' "$prog" "$1" >&2; usage ;;
  esac
done
[[ -n $host && $port =~ ^[0-9]+$ ]] || usage
[[ $timeout =~ ^[0-9]+$ ]] || usage

# reachable: one TCP connect to host:port, at most 1 s
reachable() {
  # shellcheck disable=SC2016 # $0/$1 are the inner bash's arguments
  timeout 1 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null
}

if ((timeout > 0)); then
  say "waiting $timeout seconds for $host:$port"
else
  say "waiting for $host:$port without a timeout"
fi
start=$SECONDS
result=124
while :; do
  if reachable; then
    result=0
    say "$host:$port is available after $((SECONDS - start)) seconds"
    break
  fi
  if ((timeout > 0 && SECONDS - start >= timeout)); then
    say "timeout occurred after waiting $timeout seconds for $host:$port"
    break
  fi
  sleep 1
done

if ((${#cmd[@]})); then
  if ((result != 0 && strict)); then
    say "strict mode, refusing to execute subprocess"
    exit "$result"
  fi
  exec "${cmd[@]}"
fi
exit "$result"
