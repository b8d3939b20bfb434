#!/usr/bin/env bash
# Prepare one node (server, client, or the router between them) of a real testbed,
# idempotently (Debian 12, as root): install the Debian packages the runner uses on nodes, bring
# the data-plane interface up with its address (and MTU), create the work and tmpfs directories,
# authorise the management node's SSH key for root, optionally ping the peer, print a summary.
# A router gets both its interfaces (towards the client: --iface, towards the server:
# --server-iface) with their addresses, IPv4 forwarding on and the offloads that merge packets
# off; an endpoint behind a router gets its route to the other side (--route NET --via GW).
# Nothing here is persistent across reboots except packages, directories and the key:
# run it again after a reboot (a pos node boots a fresh image anyway).
#
# Standalone, from the management node (the script travels on stdin, needs no checkout):
#   ssh root@server.example.net "bash -s -- --role server --iface enp65s0f0np0 \
#       --addr 10.0.0.1/24 --authorized-key-text '$(cat ~/.ssh/id_ed25519.pub)'" \
#       <pos_scripts/prepare-node.sh
# From a testbed controller that runs one script per node (e.g. pos):
#   settings may instead come from environment variables (QIR_ROLE, QIR_IFACE, ...; see
#   --help) or, where the command pos_get_variable exists, from pos variables of the same
#   names in lower case (qir_role, qir_iface, ...), node variables first, then global ones.
# Precedence: command line > environment > pos variables > defaults.
set -euo pipefail

PROG=prepare-node

# Debian packages of a node. Keep in sync with the runner (tests/test_pos_scripts.py checks
# this list against implementations/*/apt-packages and the tools the runner calls):
#  - reachability and the runner's own commands (interop_runner/testbed/node.py REQUIRED_TOOLS,
#    executor, orchestrator, host knobs): sshd, bash, coreutils, b3sum (BLAKE3), findutils, grep, iproute2
#    (ip, ss, tc, nstat), util-linux (setsid, taskset, flock, lscpu), procps (ps, pgrep,
#    sysctl), openssl (certificates), iptables (loss knob), ping (peer checks), iperf3 (path
#    calibration, kernel TCP reference flows: docs/flows.md)
#  - monitors (interop_runner/monitors/) and host facts (interop_runner/testbed/hostfacts.py):
#    ethtool, sysstat (mpstat, pidstat), ifstat, tcpdump, linux-perf, zstd, hwloc-nox
#  - implementations: nginx + curl (tcp-tls), python3 + python3-venv (aioquic),
#    ca-certificates (downloads), docker.io (the node's Docker Engine for implementations that
#    run as container images; the testbed file's docker_host, by default /var/run/docker.sock),
#    and every implementations/*/apt-packages entry
NODE_PACKAGES=(
  openssh-server bash coreutils b3sum findutils grep iproute2 util-linux procps openssl iptables
  iputils-ping iperf3
  ethtool sysstat ifstat tcpdump linux-perf zstd hwloc-nox
  nginx curl python3 python3-venv ca-certificates docker.io
  build-essential make gcc g++ libc6-dev perl cmake ninja-build pkg-config libclang-dev libnuma-dev
  libssl-dev zlib1g-dev
  ngtcp2-client ngtcp2-server
)
# Debian packages of a router (--role router): what the runner needs to reach any node (sshd,
# bash, coreutils, util-linux: setsid and flock for its process groups and lease, findutils,
# grep), and the emulated path's tools: iproute2 (ip, tc: the bottleneck), iptables (loss),
# iperf3 and ping (checking the path), ethtool (offloads), tcpdump, procps (sysctl), and gcc,
# libc6-dev and libnetfilter-queue-dev to build the delay line on NFQUEUE
ROUTER_PACKAGES=(
  openssh-server bash coreutils util-linux findutils grep
  iproute2 iptables iperf3 iputils-ping ethtool tcpdump gcc libc6-dev libnetfilter-queue-dev
  procps
)
# What a router turns off on both interfaces (ethtool -K names), so that it forwards what it
# receives packet by packet, as a router with offloads off: segmentation on send (tso, gso,
# tx-udp-segmentation) and merging on receive (gro, lro, rx-gro-hw). Features a NIC does not
# have, or has fixed, are left as they are.
ROUTER_OFFLOADS=(tso gso gro lro rx-gro-hw tx-udp-segmentation)

usage() {
  cat <<'EOF'
Usage: prepare-node.sh --role server|client --iface IF --addr IP/PREFIX [options]
       prepare-node.sh --role router --iface IF --addr IP/PREFIX \
                       --server-iface IF2 --server-addr IP2/PREFIX [options]

Prepares a testbed node for the Extended QUIC Interop Runner (Debian 12, as root).

  --role server|client|router the node's role                          (QIR_ROLE)
  --iface IF                  data-plane interface, must exist; a router's
                              interface towards the client              (QIR_IFACE)
  --addr IP/PREFIX            data-plane address, e.g. 10.0.0.1/24      (QIR_ADDR)
  --server-iface IF           router: its interface towards the server  (QIR_SERVER_IFACE)
  --server-addr IP/PREFIX     router: its address there                 (QIR_SERVER_ADDR)
  --route NET/PREFIX          server, client: the other side's network,
                              reached through the router...             (QIR_ROUTE)
  --via IP                    ... at this address (the router's)        (QIR_VIA)
  --mtu N                     set the interface MTU (default: unchanged)(QIR_MTU)
  --peer IP                   ping the peer's data-plane address        (QIR_PEER)
  --peer-wait S               how long to wait for the peer (default 30)(QIR_PEER_WAIT)
  --workdir DIR               default /var/tmp/qir/<role>               (QIR_WORKDIR)
  --tmpdir DIR                default /dev/shm/qir/<role>               (QIR_TMPDIR)
  --authorized-key FILE       public key(s) to authorise for root       (QIR_AUTHORIZED_KEY)
  --authorized-key-text KEY   the same, given as text                   (QIR_AUTHORIZED_KEY_TEXT)
  --authorized-keys-file F    default: root's ~/.ssh/authorized_keys    (QIR_AUTHORIZED_KEYS_FILE)
  --no-install                do not install Debian packages            (QIR_NO_INSTALL=1)
  --dry-run                   print the commands instead of running them (QIR_DRY_RUN=1)
  --list-packages             print the Debian packages a node of the role needs
                              (without --role: a server's or client's), then exit
  -h, --help                  this help

Without pos_get_variable or environment variables, --role, --iface and --addr are required
(a router also needs --server-iface and --server-addr). A router gets IPv4 forwarding on
(and IPv6 forwarding with IPv6 addresses) and tso, gso, gro, lro, rx-gro-hw and
tx-udp-segmentation off on both interfaces; it needs no Docker Engine.
EOF
}

die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 1
}
log() { printf '[%s] %s\n' "$PROG" "$*" >&2; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
is_true() { [[ ${1,,} =~ ^(1|y|yes|true|on)$ ]]; }

DRY=0
# run CMD...: run a command that changes the node, or print it with --dry-run. A failure ends
# the script with one line naming the command and the last line of its error output.
run() {
  if ((DRY)); then
    printf '+ %s\n' "$(quote "$@")"
    return 0
  fi
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  if ((rc)); then
    err=$(printf '%s\n' "$err" | grep -v '^[[:space:]]*$' | tail -n 1)
    die "'$(quote "$@")' failed (exit $rc): ${err:-no error output}"
  fi
}
quote() {
  local out="" a q sq="'"
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then q=$a; else q="'${a//$sq/$sq\\$sq$sq}'"; fi
    out+="${out:+ }$q"
  done
  printf '%s' "$out"
}

# pos integration: a setting not given otherwise may be a pos variable (node, then global).
pos_var() {
  command -v pos_get_variable >/dev/null 2>&1 || return 1
  local v
  if v=$(pos_get_variable "$1" 2>/dev/null) && [[ -n $v ]]; then
    printf '%s' "$v"
  elif v=$(pos_get_variable "$1" --from-global 2>/dev/null) && [[ -n $v ]]; then
    printf '%s' "$v"
  else
    return 1
  fi
}

valid_ipv4() {
  local ip=$1 o
  [[ $ip =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || return 1
  IFS=. read -r -a o <<<"$ip"
  for ip in "${o[@]}"; do ((10#$ip <= 255)) || return 1; done
}
# int_in VALUE MIN MAX: VALUE is a decimal integer in [MIN, MAX]
int_in() { [[ $1 =~ ^[0-9]{1,6}$ ]] && ((10#$1 >= $2 && 10#$1 <= $3)); }
valid_ipv6() { [[ $1 == *:* && $1 =~ ^[0-9A-Fa-f:.]+$ ]]; }
valid_ip() { valid_ipv4 "$1" || valid_ipv6 "$1"; }
# like the runner's testbed file: absolute and at least two levels deep
valid_dir() { [[ $1 == /* && $1 =~ ^/+[^/]+/+[^/] && $1 != *..* ]]; }
# check_cidr OPTION VALUE: VALUE is an IPv4 or IPv6 address with a prefix length (or die)
check_cidr() {
  local opt=$1 value=$2 ip plen maxlen=32
  [[ $value == */* ]] || die "$opt '$value' needs a prefix length, e.g. $value/24"
  ip=${value%/*} plen=${value##*/}
  valid_ip "$ip" || die "$opt '$value': '$ip' is not an IPv4 or IPv6 address"
  valid_ipv6 "$ip" && maxlen=128
  int_in "$plen" 0 "$maxlen" || die "$opt '$value': prefix length must be 0..$maxlen"
}
# require_iface IF: the interface exists on this host (or die naming those that do)
require_iface() {
  local iface=$1 have=() n
  if ! [[ $iface =~ ^[A-Za-z0-9_.:@-]{1,15}$ && -e /sys/class/net/$iface ]]; then
    for n in /sys/class/net/*; do have+=("${n##*/}"); done
    die "interface '$iface' not found on $(hostname) (interfaces: ${have[*]})"
  fi
}
key_line_ok() {
  [[ $1 =~ ^(ssh-ed25519|ssh-rsa|ssh-dss|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)[[:space:]]+[A-Za-z0-9+/]+=*([[:space:]].*)?$ ]]
}

# setup_iface IF ADDR MTU: the interface up, its MTU (if given) and its one address ADDR
setup_iface() {
  local iface=$1 addr=$2 mtu=$3 ip=${2%/*} plen=${2##*/}
  if ! ip -o link show dev "$iface" | grep -q '<[^>]*\bUP\b'; then
    run ip link set dev "$iface" up
  fi
  if [[ -n $mtu && $(cat "/sys/class/net/$iface/mtu") != "$mtu" ]]; then
    run ip link set dev "$iface" mtu "$mtu"
  fi
  # the same address with another prefix length would stay next to the new one: remove it
  local fam=-4 cur
  valid_ipv6 "$ip" && fam=-6
  while read -r cur; do
    if [[ -n $cur && ${cur%/*} == "$ip" && $cur != "$ip/$plen" ]]; then
      run ip addr del "$cur" dev "$iface"
    fi
  done < <(ip -o "$fam" addr show dev "$iface" | awk '{print $4}')
  run ip addr replace "$addr" dev "$iface"
  local elsewhere
  elsewhere=$(ip -o "$fam" addr show | awk -v ip="$ip" -v ifc="$iface" \
    '{split($4, a, "/"); if (a[1] == ip && $2 != ifc) print $2}' | sort -u | tr '\n' ' ')
  [[ -z $elsewhere ]] || warn "$ip is also configured on ${elsewhere% }: traffic may not use $iface"
}

# router_forwarding ADDR...: IPv4 forwarding on (IPv6 too when an address is IPv6); sets the
# summary's fwd_note (a local of main)
router_forwarding() {
  local a keys=(net.ipv4.ip_forward) key done=()
  for a in "$@"; do
    if valid_ipv6 "${a%/*}"; then keys+=(net.ipv6.conf.all.forwarding); break; fi
  done
  for key in "${keys[@]}"; do
    if [[ $(cat "/proc/sys/${key//.//}" 2>/dev/null) != 1 ]]; then
      run sysctl -qw "$key=1"
    fi
    done+=("$key=1")
  done
  fwd_note="${done[*]}"
}

# router_offloads IF...: ROUTER_OFFLOADS off where an interface has them on (and not fixed);
# sets the summary's offload_note (a local of main)
router_offloads() {
  local iface k name state fixed notes=() kept=()
  local -A long=([tso]=tcp-segmentation-offload [gso]=generic-segmentation-offload
                 [gro]=generic-receive-offload [lro]=large-receive-offload
                 [rx-gro-hw]=rx-gro-hw [tx-udp-segmentation]=tx-udp-segmentation)
  for iface in "$@"; do
    local off=() features
    features=$(ethtool -k "$iface" 2>/dev/null || true)
    for k in "${ROUTER_OFFLOADS[@]}"; do
      name=${long[$k]}
      read -r state fixed < <(awk -v n="$name:" '$1 == n {print $2, $3}' <<<"$features") || true
      [[ $state == on ]] || continue
      if [[ $fixed == "[fixed]" ]]; then
        kept+=("$iface:$k")
      else
        off+=("$k" off)
      fi
    done
    ((${#off[@]} == 0)) || run ethtool -K "$iface" "${off[@]}"
    notes+=("$iface")
  done
  ((${#kept[@]} == 0)) || warn "offloads fixed on, left as they are: ${kept[*]}"
  offload_note="${ROUTER_OFFLOADS[*]} off on ${notes[*]}${kept[*]:+ (fixed on: ${kept[*]})}"
}

main() {
  # settings: environment first, the command line overrides
  local role=${QIR_ROLE:-} iface=${QIR_IFACE:-} addr=${QIR_ADDR:-} mtu=${QIR_MTU:-}
  local peer=${QIR_PEER:-} peer_wait=${QIR_PEER_WAIT:-} workdir=${QIR_WORKDIR:-}
  local tmpdir=${QIR_TMPDIR:-} key_file=${QIR_AUTHORIZED_KEY:-}
  local key_text=${QIR_AUTHORIZED_KEY_TEXT:-} ak_file=${QIR_AUTHORIZED_KEYS_FILE:-}
  local no_install=${QIR_NO_INSTALL:-} dry=${QIR_DRY_RUN:-}
  local server_iface=${QIR_SERVER_IFACE:-} server_addr=${QIR_SERVER_ADDR:-}
  local route=${QIR_ROUTE:-} via=${QIR_VIA:-} list_packages=0

  while (($#)); do
    case $1 in
      -h | --help) usage; return 0 ;;
      --list-packages) list_packages=1; shift; continue ;;
      --no-install) no_install=1; shift; continue ;;
      --dry-run) dry=1; shift; continue ;;
      --role | --iface | --addr | --mtu | --peer | --peer-wait | --workdir | --tmpdir | \
        --authorized-key | --authorized-key-text | --authorized-keys-file | --server-iface | \
        --server-addr | --route | --via)
        (($# >= 2)) || die "$1 needs a value (see --help)" ;;
      --*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}"; continue ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
    case $1 in
      --role) role=$2 ;;
      --iface) iface=$2 ;;
      --addr) addr=$2 ;;
      --mtu) mtu=$2 ;;
      --peer) peer=$2 ;;
      --peer-wait) peer_wait=$2 ;;
      --workdir) workdir=$2 ;;
      --tmpdir) tmpdir=$2 ;;
      --authorized-key) key_file=$2 ;;
      --authorized-key-text) key_text=$2 ;;
      --authorized-keys-file) ak_file=$2 ;;
      --server-iface) server_iface=$2 ;;
      --server-addr) server_addr=$2 ;;
      --route) route=$2 ;;
      --via) via=$2 ;;
    esac
    shift 2
  done
  # settings still missing: pos variables (only where pos_get_variable exists)
  local v
  [[ -n $role ]] || { v=$(pos_var qir_role) && role=$v; } || true
  [[ -n $iface ]] || { v=$(pos_var qir_iface) && iface=$v; } || true
  [[ -n $addr ]] || { v=$(pos_var qir_addr) && addr=$v; } || true
  [[ -n $mtu ]] || { v=$(pos_var qir_mtu) && mtu=$v; } || true
  [[ -n $peer ]] || { v=$(pos_var qir_peer) && peer=$v; } || true
  [[ -n $peer_wait ]] || { v=$(pos_var qir_peer_wait) && peer_wait=$v; } || true
  [[ -n $workdir ]] || { v=$(pos_var qir_workdir) && workdir=$v; } || true
  [[ -n $tmpdir ]] || { v=$(pos_var qir_tmpdir) && tmpdir=$v; } || true
  [[ -n $server_iface ]] || { v=$(pos_var qir_server_iface) && server_iface=$v; } || true
  [[ -n $server_addr ]] || { v=$(pos_var qir_server_addr) && server_addr=$v; } || true
  [[ -n $route ]] || { v=$(pos_var qir_route) && route=$v; } || true
  [[ -n $via ]] || { v=$(pos_var qir_via) && via=$v; } || true
  [[ -n $key_file || -n $key_text ]] ||
    { v=$(pos_var qir_authorized_key_text) && key_text=$v; } || true
  [[ -n $no_install ]] || { v=$(pos_var qir_no_install) && no_install=$v; } || true
  is_true "${dry:-0}" && DRY=1
  is_true "${no_install:-0}" && no_install=1 || no_install=0

  # ---- validate (no changes yet) ----
  [[ -z $role || $role == server || $role == client || $role == router ]] ||
    die "--role must be server, client or router, got '$role'"
  local packages=("${NODE_PACKAGES[@]}")
  [[ $role != router ]] || packages=("${ROUTER_PACKAGES[@]}")
  if ((list_packages)); then
    printf '%s\n' "${packages[@]}"
    return 0
  fi
  [[ -n $role ]] || die "--role is required (server, client or router)"
  [[ -n $iface ]] || die "--iface is required (the data-plane interface)"
  [[ -n $addr ]] || die "--addr is required (the data-plane address with prefix, e.g. 10.0.0.1/24)"
  check_cidr --addr "$addr"
  local ip=${addr%/*} plen=${addr##*/}
  if [[ $role == router ]]; then
    [[ -n $server_iface ]] || die "--server-iface is required for a router (its interface towards the server)"
    [[ -n $server_addr ]] || die "--server-addr is required for a router (its address towards the server, e.g. 10.0.1.254/24)"
    check_cidr --server-addr "$server_addr"
    [[ $server_iface != "$iface" ]] || die "--server-iface and --iface must differ (the router's two sides)"
    [[ -z $route && -z $via ]] || die "--route and --via are for server and client (a router reaches both sides directly)"
  else
    [[ -z $server_iface && -z $server_addr ]] ||
      die "--server-iface and --server-addr are only for --role router"
    if [[ -n $route || -n $via ]]; then
      [[ -n $route && -n $via ]] || die "--route and --via go together (the other side's network and the router's address)"
      check_cidr --route "$route"
      valid_ip "$via" || die "--via '$via' is not an IP address (no prefix)"
    fi
  fi
  if [[ -n $mtu ]]; then
    int_in "$mtu" 68 65535 ||
      die "--mtu must be a number between 68 and 65535, got '$mtu'"
  fi
  [[ -z $peer ]] || valid_ip "$peer" || die "--peer '$peer' is not an IP address (no prefix)"
  peer_wait=${peer_wait:-30}
  int_in "$peer_wait" 1 86400 ||
    die "--peer-wait must be a whole number of seconds >= 1, got '$peer_wait'"
  workdir=${workdir:-/var/tmp/qir/$role}
  tmpdir=${tmpdir:-/dev/shm/qir/$role}
  valid_dir "$workdir" || die "--workdir '$workdir' must be an absolute path at least two levels deep"
  valid_dir "$tmpdir" || die "--tmpdir '$tmpdir' must be an absolute path at least two levels deep"
  [[ $workdir != "$tmpdir" ]] || die "--workdir and --tmpdir must differ"

  local keys=() line
  if [[ -n $key_file ]]; then
    [[ -r $key_file ]] || die "--authorized-key '$key_file': no such readable file on $(hostname)"
    while IFS= read -r line || [[ -n $line ]]; do
      [[ -n ${line//[[:space:]]/} && $line != \#* ]] || continue
      key_line_ok "$line" || die "--authorized-key '$key_file': not an OpenSSH public key line: ${line:0:40}"
      keys+=("$line")
    done <"$key_file"
    ((${#keys[@]})) || die "--authorized-key '$key_file' holds no public key"
  fi
  if [[ -n $key_text ]]; then
    key_text=${key_text%$'\n'}
    [[ $key_text != *$'\n'* ]] || die "--authorized-key-text must be one line"
    key_line_ok "$key_text" || die "--authorized-key-text is not an OpenSSH public key line (type base64 [comment])"
    keys+=("$key_text")
  fi

  ((DRY)) || (($(id -u) == 0)) || die "must run as root (it changes interfaces, packages and root's SSH keys); --dry-run works without"
  command -v ip >/dev/null || die "'ip' not found: install iproute2 first"

  require_iface "$iface"
  if [[ $role == router ]]; then
    require_iface "$server_iface"
    command -v ethtool >/dev/null || ((!no_install)) ||
      die "ethtool not found: a router needs it for its offloads (install ethtool, or drop --no-install)"
  fi
  ((DRY)) && log "dry run: printing the commands that would change the node"

  # ---- packages ----
  local missing=() pkg status pkg_note
  if ((no_install)); then
    pkg_note="not checked (--no-install)"
  else
    for pkg in "${packages[@]}"; do
      status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
      [[ $status == "install ok installed" ]] || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
      command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian 12"
      log "installing Debian packages: ${missing[*]}"
      if ((DRY)); then
        run env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
      else
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
          die "apt-get update failed (see above)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          "${missing[@]}" >&2 || die "installing ${missing[*]} failed (see above)"
      fi
      pkg_note="installed ${#missing[@]}: ${missing[*]}"
    else
      pkg_note="all ${#packages[@]} present"
    fi
  fi

  # ---- Docker Engine (installed with the packages; Debian's postinst starts it) ----
  local engine_note out
  if [[ $role == router ]]; then
    engine_note="not used (a router runs no implementation)"
  elif ((no_install)); then
    engine_note="not checked (--no-install)"
  elif ((DRY)); then
    engine_note="not checked (dry run)"
  elif out=$(timeout 60 docker version --format '{{.Server.Version}}' 2>&1); then
    engine_note="docker $out answers"
  else
    out=$(printf '%s\n' "$out" | grep -v '^[[:space:]]*$' | tail -n 1)
    die "the Docker Engine does not answer ('docker version': ${out:-no output}); start it (systemctl enable --now docker) and run again"
  fi

  # ---- interface(s), address(es), MTU; a router's forwarding, an endpoint's route ----
  setup_iface "$iface" "$addr" "$mtu"
  local fwd_note="" offload_note=""
  if [[ $role == router ]]; then
    setup_iface "$server_iface" "$server_addr" "$mtu"
    router_forwarding "$addr" "$server_addr"
    router_offloads "$iface" "$server_iface"
  elif [[ -n $route ]]; then
    run ip route replace "$route" via "$via" dev "$iface"
  fi

  # ---- directories ----
  run mkdir -p -m 0755 "$workdir" "$tmpdir"

  # ---- SSH key of the management node ----
  local key_note="none given"
  if ((${#keys[@]})); then
    if [[ -z $ak_file ]]; then
      local home
      home=$(getent passwd root | cut -d: -f6)
      ak_file=${home:-/root}/.ssh/authorized_keys
    fi
    local added=0 present=0 blob k
    [[ -d $(dirname "$ak_file") ]] || run mkdir -p -m 0700 "$(dirname "$ak_file")"
    for k in "${keys[@]}"; do
      read -r _ blob _ <<<"$k"
      if [[ -f $ak_file ]] && awk -v b="$blob" '{for (i = 1; i <= NF; i++) if ($i == b) f = 1}
                                                END {exit !f}' "$ak_file"; then
        present=$((present + 1))
        continue
      fi
      if ((DRY)); then
        printf '+ %s >> %s\n' "$(quote printf '%s\n' "$k")" "$(quote "$ak_file")"
      else
        # a file without a final newline must not glue two keys together
        if [[ -s $ak_file && $(tail -c 1 "$ak_file" | od -An -c | tr -d ' ') != '\n' ]]; then
          printf '\n' >>"$ak_file"
        fi
        printf '%s\n' "$k" >>"$ak_file" || die "cannot write $ak_file"
      fi
      added=$((added + 1))
    done
    if ((DRY)) || [[ $(stat -c %a "$ak_file") != 600 ]]; then
      run chmod 0600 "$ak_file"
    fi
    key_note="$ak_file: $added added, $present already present"
  fi

  # ---- peer ----
  local peer_note="not checked (no --peer)" rc=0
  if [[ -n $peer ]]; then
    local ping_cmd=(ping -n -c 1 -w "$peer_wait" -I "$iface" "$peer")
    if ((DRY)); then
      run "${ping_cmd[@]}"
      peer_note="not checked (dry run)"
    else
      command -v ping >/dev/null || die "ping not found (install iputils-ping, or drop --peer)"
      local out
      log "waiting up to ${peer_wait}s for $peer over $iface"
      if out=$("${ping_cmd[@]}" 2>&1); then
        peer_note="$peer reachable over $iface ($(printf '%s\n' "$out" | grep -o 'time=[0-9.]* ms' | head -n 1))"
      else
        peer_note="$peer NOT reachable over $iface within ${peer_wait}s"
        rc=2
      fi
    fi
  fi

  # ---- summary ----
  local state cur_mtu addrs fs tools have_tools=()
  state=$(cat "/sys/class/net/$iface/operstate" 2>/dev/null || echo '?')
  cur_mtu=$(cat "/sys/class/net/$iface/mtu" 2>/dev/null || echo '?')
  addrs=$(ip -o addr show dev "$iface" | awk '$3 == "inet" || $3 == "inet6" {print $4}' |
    grep -v '^fe80:' | tr '\n' ' ' || true)
  fs=$(stat -f -c %T "$tmpdir" 2>/dev/null || true)
  # toolchains the builds look for (PATH, /usr/local/go/bin, ~/.cargo/bin); not installed here
  local bin
  for bin in "$(command -v go || true)" /usr/local/go/bin/go; do
    if [[ -n $bin && -x $bin ]]; then
      have_tools+=("$("$bin" env GOVERSION 2>/dev/null || echo go)")
      break
    fi
  done
  for bin in "$(command -v cargo || true)" "${HOME:-/root}/.cargo/bin/cargo"; do
    if [[ -n $bin && -x $bin ]]; then
      have_tools+=("$("$bin" --version 2>/dev/null | awk '{print $1 " " $2}' || echo cargo)")
      break
    fi
  done
  command -v npm >/dev/null && have_tools+=("npm")
  tools=$(IFS=,; printf '%s' "${have_tools[*]:-none}")
  local dry_note="" fs_note=""
  ((DRY)) && dry_note=", dry run: nothing changed"
  [[ -n $fs && $fs != tmpfs ]] && fs_note=" (on $fs, not tmpfs)"
  printf '%s summary (%s)%s\n' "$PROG" "$(hostname)" "$dry_note"
  printf '  %-11s %s\n' role "$role"
  printf '  %-11s %s (state %s, mtu %s)\n' interface "$iface" "$state" "$cur_mtu"
  printf '  %-11s %s\n' addresses "${addrs% }"
  if [[ $role == router ]]; then
    state=$(cat "/sys/class/net/$server_iface/operstate" 2>/dev/null || echo '?')
    cur_mtu=$(cat "/sys/class/net/$server_iface/mtu" 2>/dev/null || echo '?')
    addrs=$(ip -o addr show dev "$server_iface" |
      awk '$3 == "inet" || $3 == "inet6" {print $4}' | grep -v '^fe80:' | tr '\n' ' ' || true)
    printf '  %-11s %s (state %s, mtu %s; towards the server)\n' server-if "$server_iface" \
      "$state" "$cur_mtu"
    printf '  %-11s %s\n' addresses "${addrs% }"
    printf '  %-11s %s\n' forwarding "$fwd_note"
    printf '  %-11s %s\n' offloads "$offload_note"
  elif [[ -n $route ]]; then
    printf '  %-11s %s via %s dev %s\n' route "$route" "$via" "$iface"
  fi
  printf '  %-11s %s\n' workdir "$workdir"
  printf '  %-11s %s%s\n' tmpdir "$tmpdir" "$fs_note"
  printf '  %-11s %s\n' packages "$pkg_note"
  printf '  %-11s %s\n' engine "$engine_note"
  printf '  %-11s %s\n' ssh-key "$key_note"
  printf '  %-11s %s\n' peer "$peer_note"
  if [[ $role != router ]]; then
    printf '  %-11s %s (builds need Go >= 1.26 for quic-go, cargo for the Rust ones)\n' \
      toolchains "${tools//,/, }"
  fi
  if ((rc)); then
    printf '%s: peer %s not reachable over %s within %ss\n' "$PROG" "$peer" "$iface" "$peer_wait" >&2
  fi
  return "$rc"
}

# stdin is the script itself under `bash -s`: commands must not read it
main "$@" </dev/null
exit $?
