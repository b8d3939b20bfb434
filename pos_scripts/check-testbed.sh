#!/usr/bin/env bash
# Check a testbed file of real hosts from the management node, the way the runner will use it:
# per node SSH (the configured user, port, key, known_hosts and jump host; BatchMode, so no
# prompts; unknown host keys are refused as the runner refuses them, or added with a warning
# where the testbed file sets ssh.trust_on_first_use), the data-plane interface
# and its address, the tools the runner calls, and from the client a ping to the server's
# data-plane address over the data interface. A router (role router) is checked for its two
# interfaces, IPv4 forwarding and its tools, and the ping then also goes through it (to the
# endpoints' via_router addresses where they have them). One line per check (ok / FAIL / warn /
# skip); exit status 1 if any check failed, 2 for a bad testbed file or usage.
#
# Usage: pos_scripts/check-testbed.sh [--timeout S] [--facts] TESTBED.yml
#   --timeout S   SSH connect timeout in seconds (default: each node's ssh.connect_timeout)
#   --facts       also print each reachable node's host facts summary (the same script the
#                 runner runs once per campaign, interop_runner/testbed/hostfacts.py), as JSON
# The testbed file is read with the project's own loader (interop_runner.config.loader.load_testbed)
# through .venv/bin/python (QIR_PYTHON overrides), so it is validated exactly like `run.py`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON=${QIR_PYTHON:-$ROOT/.venv/bin/python}
PROG=check-testbed

usage() { sed -n '12,18s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 2
}

timeout_override="" facts=0 file=""
while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --timeout)
      (($# >= 2)) || die "--timeout needs a value"
      timeout_override=$2
      shift 2
      ;;
    --timeout=*) timeout_override=${1#*=}; shift ;;
    --facts) facts=1; shift ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *)
      [[ -z $file ]] || die "one testbed file only (got '$file' and '$1')"
      file=$1
      shift
      ;;
  esac
done
[[ -n $file ]] || { usage >&2; exit 2; }
[[ -f $file ]] || die "$file: no such file"
if [[ -n $timeout_override && ! $timeout_override =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  die "--timeout must be a number of seconds, got '$timeout_override'"
fi
[[ -x $PYTHON ]] || die "$PYTHON not found: run pos_scripts/install.sh (or set QIR_PYTHON)"
command -v ssh >/dev/null || die "ssh not found: install openssh-client"

# The testbed as shell assignments (values quoted by shlex), from the runner's own loader.
# Also the tools the runner needs on every node and those of each monitor.
read -r -d '' PY <<'EOF' || true
import ipaddress, math, os, shlex, sys
from interop_runner.config.loader import load_testbed
from interop_runner.errors import ConfigError
from interop_runner.monitors import MONITORS as MONITOR_SPECS
from interop_runner.testbed.node import REQUIRED_TOOLS, ROUTER_TOOLS

try:
    tb = load_testbed(sys.argv[1])
except ConfigError as exc:
    for line in exc.lines:
        print(f"error: {line}", file=sys.stderr)
    sys.exit(2)
q = shlex.quote
exp = lambda p: os.path.expanduser(p) if p else ""

def ssh_opts(s, timeout):
    """OpenSSH options equivalent to the runner's paramiko connection (executor.SSHExecutor)."""
    opts = ["-F", "/dev/null", "-p", str(s.port), "-l", s.user, "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={max(1, math.ceil(timeout or s.connect_timeout))}",
            # trust on first use as the runner: an unknown key is added, a changed one refused
            "-o", "StrictHostKeyChecking=" + ("accept-new" if s.trust_on_first_use else "yes"),
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", f"UserKnownHostsFile={exp(s.known_hosts or '~/.ssh/known_hosts')}",
            "-o", "LogLevel=ERROR"]
    if s.key:
        opts += ["-i", exp(s.key), "-o", "IdentitiesOnly=yes"]
    if s.jump:
        proxy = shlex.join(["ssh", *ssh_opts(s.jump, timeout), "-W", "%h:%p", s.jump.host])
        opts += ["-o", f"ProxyCommand={proxy}"]
    return opts

timeout = float(sys.argv[2]) if sys.argv[2] else None
print(f"TESTBED={q(tb.name)}")
for i, (name, n) in enumerate(sorted(tb.nodes.items(), key=lambda kv: kv[1].role != "server")):
    s = n.ssh
    print(f"NAME[{i}]={q(name)} ROLE[{i}]={q(n.role)} IFACE[{i}]={q(n.interface)} "
          f"IP[{i}]={q(str(ipaddress.ip_address(n.ip)))} HOST[{i}]={q(s.host)} "
          f"TARGET[{i}]={q(f'{s.user}@{s.host}:{s.port}' + (f' via {s.jump.host}' if s.jump else ''))} "
          f"KEY[{i}]={q(exp(s.key))} KNOWN[{i}]={q(exp(s.known_hosts or '~/.ssh/known_hosts'))} "
          f"CT[{i}]={max(1, math.ceil(timeout or s.connect_timeout))} "
          f"TOFU[{i}]={int(s.trust_on_first_use)}")
    path = n.through_router()
    print(f"SIFACE[{i}]={q(n.server_interface or '')} PATH_IFACE[{i}]={q(path.interface)} "
          f"PATH_IP[{i}]={q(str(ipaddress.ip_address(path.ip)))}")
    print(f"SSHOPTS_{i}=({' '.join(q(o) for o in ssh_opts(s, timeout))})")
print(f"REQUIRED_TOOLS=({' '.join(q(t) for t in REQUIRED_TOOLS)})")
print(f"ROUTER_TOOLS=({' '.join(q(t) for t in ROUTER_TOOLS)})")
print(f"MONITORS=({' '.join(q(f'{m}:' + ','.join(spec.tools)) for m, spec in MONITOR_SPECS.items())})")
EOF
settings=$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" \
  "$PYTHON" -c "$PY" "$file" "$timeout_override") || exit 2
declare -a NAME ROLE IFACE IP HOST TARGET KEY KNOWN CT TOFU SIFACE PATH_IFACE PATH_IP
declare -a REQUIRED_TOOLS ROUTER_TOOLS MONITORS
TESTBED=""
eval "$settings"

failed=0 checks=0
ok() { checks=$((checks + 1)); printf 'ok   %s: %s\n' "$1" "$2"; }
fail() { checks=$((checks + 1)); failed=$((failed + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }
warn() { printf 'warn %s: %s\n' "$1" "$2"; }
skip() { printf 'skip %s: %s\n' "$1" "$2"; }
# sq WORD: WORD quoted for any POSIX shell (ssh hands the command line to the login shell)
sq() { local q="'"; printf "'%s'" "${1//$q/$q\\$q$q}"; }
last_line() { grep -v '^[[:space:]]*$' | tail -n 1; }

# rssh I CMD...: run CMD on node I (stdin closed); a hard time limit on top of ConnectTimeout
rssh() {
  local i=$1 opts
  shift
  opts="SSHOPTS_${i}[@]"
  timeout -k 5 $((CT[i] + 60)) ssh "${!opts}" "${HOST[i]}" "$@" </dev/null
}

# The per-node probe (POSIX sh, $1 = interface, $2 = a router's interface towards the server
# or "", then tools): interface state and MTU, its addresses, the router's other interface and
# its IPv4 forwarding, and the tools that are not on PATH.
read -r -d '' PROBE <<'EOF' || true
ifc=$1; sifc=$2; shift 2
if [ -e "/sys/class/net/$ifc" ]; then
  echo "state $(cat "/sys/class/net/$ifc/operstate") $(cat "/sys/class/net/$ifc/mtu")"
  ip -o addr show dev "$ifc" 2>/dev/null | awk "{print \"addr \" \$4}"
else
  echo "state MISSING"; echo "ifaces $(ls /sys/class/net | tr "\n" " ")"
fi
if [ -n "$sifc" ]; then
  if [ -e "/sys/class/net/$sifc" ]; then
    echo "sstate $(cat "/sys/class/net/$sifc/operstate") $(cat "/sys/class/net/$sifc/mtu")"
  else
    echo "sstate MISSING"
  fi
  echo "forward $(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null || echo '?')"
fi
for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "missing $t"; done
exit 0
EOF

echo "testbed $TESTBED ($file)"
reachable=()
for i in "${!NAME[@]}"; do
  n=${NAME[i]}
  reachable[i]=0
  if [[ -n ${KEY[i]} && ! -r ${KEY[i]} ]]; then
    fail "$n" "ssh ${TARGET[i]}: key ${KEY[i]} not found or not readable"
  elif [[ ! -r ${KNOWN[i]} && ${TOFU[i]} != 1 ]]; then
    fail "$n" "ssh ${TARGET[i]}: known_hosts ${KNOWN[i]} not found (the runner refuses unknown host keys; ssh-keyscan the node into it, or set ssh.trust_on_first_use: true)"
  elif [[ ${TOFU[i]} == 1 && ! -d $(dirname -- "${KNOWN[i]}") ]] &&
      ! install -d -m 700 -- "$(dirname -- "${KNOWN[i]}")"; then
    fail "$n" "ssh ${TARGET[i]}: cannot create the directory of known_hosts ${KNOWN[i]}"
  elif err=$(rssh "$i" true 2>&1); then
    if [[ ${TOFU[i]} == 1 ]]; then
      warn "$n" "ssh.trust_on_first_use: an unknown host key is accepted and added to ${KNOWN[i]} (a changed one is still refused)"
    fi
    ok "$n" "ssh ${TARGET[i]}"
    reachable[i]=1
  else
    fail "$n" "ssh ${TARGET[i]}: $(printf '%s\n' "${err:-no answer within ${CT[i]}s (timeout)}" | last_line)"
  fi
  if ((!reachable[i])); then
    skip "$n" "interface, address and tools (no ssh)"
    continue
  fi

  # one round trip: interface state, its addresses, missing tools
  if [[ ${ROLE[i]} == router ]]; then
    need=("${ROUTER_TOOLS[@]}") tools=("${ROUTER_TOOLS[@]}")  # a router runs no monitors
  else
    need=("${REQUIRED_TOOLS[@]}") tools=("${REQUIRED_TOOLS[@]}")
    for m in "${MONITORS[@]}"; do IFS=, read -r -a mt <<<"${m#*:}"; tools+=("${mt[@]}"); done
  fi
  probe=$(rssh "$i" sh -c "$(sq "$PROBE")" probe "$(sq "${IFACE[i]}")" "$(sq "${SIFACE[i]}")" \
    "${tools[@]}" 2>&1) || {
    fail "$n" "probe over ssh failed: $(printf '%s\n' "$probe" | last_line)"
    continue
  }
  state="" mtu=""
  read -r _ state mtu < <(grep '^state ' <<<"$probe") || true
  if [[ $state == MISSING ]]; then
    fail "$n" "interface ${IFACE[i]} does not exist ($(grep '^ifaces ' <<<"$probe" | cut -d' ' -f2-| sed 's/ *$//'))"
    skip "$n" "address ${IP[i]} (no interface)"
  else
    if [[ $state == down ]]; then
      fail "$n" "interface ${IFACE[i]} is down (mtu $mtu)"
    else
      ok "$n" "interface ${IFACE[i]} (state $state, mtu $mtu)"
    fi
    addrs=$(grep '^addr ' <<<"$probe" | cut -d' ' -f2 | grep -iv '^fe80:' | tr '\n' ' ' || true)
    found=0
    for a in $addrs; do
      if [[ ${a%/*} == "${IP[i]}" ]]; then found=1; fi
    done
    if ((found)); then
      ok "$n" "address ${IP[i]} on ${IFACE[i]}"
    else
      addrs=${addrs% }
      fail "$n" "address ${IP[i]} not on ${IFACE[i]} (has: ${addrs:-none})"
    fi
  fi
  if [[ ${ROLE[i]} == router ]]; then
    read -r _ state mtu < <(grep '^sstate ' <<<"$probe") || true
    if [[ $state == MISSING ]]; then
      fail "$n" "server_interface ${SIFACE[i]} does not exist"
    elif [[ $state == down ]]; then
      fail "$n" "server_interface ${SIFACE[i]} is down (mtu $mtu)"
    else
      ok "$n" "server_interface ${SIFACE[i]} (state $state, mtu $mtu)"
    fi
    read -r _ forward < <(grep '^forward ' <<<"$probe") || true
    if [[ $forward == 1 ]]; then
      ok "$n" "IPv4 forwarding on"
    else
      fail "$n" "IPv4 forwarding off (net.ipv4.ip_forward=${forward:-?}; pos_scripts/prepare-node.sh --role router turns it on)"
    fi
  fi
  missing=" $(grep '^missing ' <<<"$probe" | cut -d' ' -f2 | tr '\n' ' ' || true)"
  req_missing=()
  for t in "${need[@]}"; do
    if [[ $missing == *" $t "* ]]; then req_missing+=("$t"); fi
  done
  if ((${#req_missing[@]})); then
    fail "$n" "required tools missing: ${req_missing[*]} (pos_scripts/prepare-node.sh installs them)"
  else
    ok "$n" "required tools (${#need[@]})"
  fi
  [[ ${ROLE[i]} != router ]] || continue
  for m in "${MONITORS[@]}"; do
    IFS=, read -r -a mt <<<"${m#*:}"
    gone=()
    for t in "${mt[@]}"; do
      if [[ $missing == *" $t "* ]]; then gone+=("$t"); fi
    done
    ((${#gone[@]} == 0)) || warn "$n" "monitor ${m%%:*} unavailable: ${gone[*]} missing"
  done
done

# data plane: client -> server over the client's data interface; with a router, also through
# it to the endpoints' via_router addresses (where `interface`/`ip` are a direct link)
si="" ci="" ri=""
for i in "${!NAME[@]}"; do
  case ${ROLE[i]} in
    server) si=$i ;;
    client) ci=$i ;;
    router) ri=$i ;;
  esac
done
cn=${NAME[ci]}
pings=("${IP[si]} ${IFACE[ci]}")
if [[ -n $ri && ( ${PATH_IP[si]} != "${IP[si]}" || ${PATH_IFACE[ci]} != "${IFACE[ci]}" ) ]]; then
  pings+=("${PATH_IP[si]} ${PATH_IFACE[ci]}")
fi
for p in "${pings[@]}"; do
  read -r dst dev <<<"$p"
  what="ping $dst (${NAME[si]}) over $dev"
  [[ -z $ri || $dst != "${PATH_IP[si]}" ]] || what+=" through ${NAME[ri]}"
  if ((!reachable[ci])); then
    skip "$cn" "$what (no ssh)"
  elif out=$(rssh "$ci" ping -n -q -c 3 -W 1 -I "$(sq "$dev")" "$(sq "$dst")" 2>&1); then
    stats=$(grep -o '[0-9]* packets transmitted, [0-9]* received' <<<"$out" || true)
    sent="" recv=""
    read -r sent _ _ recv _ <<<"$stats" || true
    rtt=$(grep -o '= [0-9.]*/[0-9.]*' <<<"$out" | cut -d/ -f2 || true)
    if [[ -n $sent && $sent == "$recv" ]]; then
      ok "$cn" "$what: $recv/$sent replies${rtt:+, avg rtt $rtt ms}"
    else
      fail "$cn" "$what: ${recv:-?}/${sent:-?} replies"
    fi
  else
    rc=$?
    if ((rc == 127)) || grep -q 'ping: *\(command \)\?not found' <<<"$out"; then
      fail "$cn" "$what: ping not found on the node (install iputils-ping)"
    else
      fail "$cn" "$what: $(printf '%s\n' "$out" | grep -v '^$' | grep -v '^---' | last_line)"
    fi
  fi
done

if ((facts)); then
  read -r -d '' FACTS_PY <<'EOF' || true
import json, sys
from interop_runner.parsers.hostfacts import split_sections, summarize_facts
from interop_runner.testbed.hostfacts import FACTS_SCRIPT
if sys.argv[1] == "script":
    print(FACTS_SCRIPT)
else:
    print(json.dumps(summarize_facts(split_sections(sys.stdin.read())), indent=2))
EOF
  py() { PYTHONPATH="$ROOT" "$PYTHON" -c "$FACTS_PY" "$@"; }
  script=$(py script)
  for i in "${!NAME[@]}"; do
    ((reachable[i])) || continue
    echo "facts ${NAME[i]} (${HOST[i]}, ${IFACE[i]}):"
    if raw=$(rssh "$i" sh -c "$(sq "$script")" facts "$(sq "${IFACE[i]}")"); then
      py summary <<<"$raw"
    else
      warn "${NAME[i]}" "host facts could not be collected"
    fi
  done
fi

if ((failed)); then
  echo "$PROG: $failed of $checks checks failed"
  exit 1
fi
echo "$PROG: all $checks checks passed"
