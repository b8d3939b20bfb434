#!/usr/bin/env bash
# Installs what the management node and the local testbed need, idempotently, as root on
# Debian 12. The core always: the Debian packages of the management node and the local testbed,
# and the Python venv (.venv) from the first section of requirements.txt. The rest only for the
# targets named:
#
#   pos_scripts/install.sh [--for CONFIG]... [--impl NAME]... [--base NAME]... [--tool inferno]
#                          [--notebook] [--tests] [--all] [--no-core] [--plan]
#
#   --for CONFIG  what the campaign CONFIG needs: its implementations' offline caches, the base
#                 image of image implementations, inferno when it has the perf monitor
#   --impl NAME   the offline caches the nodes build NAME from (Debian packages in its
#                 apt-packages, Python wheels, Go modules, Rust crates, npm packages, source
#                 archives), and for an image implementation its base image (docker.io,
#                 mmdebstrap) and the implementations it copies builds of
#   --base NAME   a container base image (implementations/_shared/image-bases/NAME)
#   --tool inferno  flame graphs (cargo install, about a minute)
#   --notebook    the whole requirements.txt: JupyterLab, nbconvert, the kernel, pytest, mypy
#   --tests       what the tests need besides: Chromium, chromedriver, shellcheck, busybox-static
#   --all         all of it (the default when no target is named; ./test.sh)
#   --no-core     skip the core (run.py run does, filling what a campaign lacks from its venv)
#   --plan        print the targets and install nothing
#
# Each step prints its name and how long it took ("[install] python venv: 12.3 s"). A target
# that is installed and unchanged takes no time: stamps in /var/cache/qir/install
# ($QIR_INSTALL_STAMPS) hold the SHA-256 of its lock files and the cache paths it filled.
set -euo pipefail
# a failing command inside $(...) fails the assignment too (bash does not by default), so a
# failed download is never stamped as installed
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The management node and the local testbed's nodes (the same host).
CORE_PACKAGES=(openssh-server openssh-client nginx curl iproute2 ethtool procps util-linux
               coreutils b3sum openssl python3 python3-venv git ca-certificates sysstat
               linux-perf tcpdump ifstat hwloc-nox zstd iptables iputils-ping
               gcc libc6-dev python3-dev  # these three: the parsers' compiled loops, setup.py
               # the path's router on the local testbed: the delay line's build, calibration
               iperf3 libnetfilter-queue-dev)
# Image implementations: the nodes' engines; base images (build-base-image.sh).
IMAGE_PACKAGES=(docker.io mmdebstrap)
# The tests: the report and notebook tests' browser; the engine tests' image (made offline).
TEST_PACKAGES=(shellcheck chromium chromium-driver fonts-dejavu-core busybox-static)
GO_MIN_MINOR=26
INFERNO_VERSION=0.12.8
VENV=$ROOT/.venv
PY=${QIR_INSTALL_PYTHON:-$VENV/bin/python}  # runs the package's helpers once the venv exists
WHEELS=/var/cache/qir/wheels
NPM_CACHE=/var/cache/qir/npm

log() { printf '[install] %s\n' "$*" >&2; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# step NAME COMMAND...: run it, then print its name and the seconds it took
step() {
  local name=$1 t0
  shift
  t0=$(date +%s%N)
  "$@"
  log "$name: $(awk -v d=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.1f", d / 1e9 }') s"
}

helper() {
  [[ -x $PY ]] || die "$PY not found: the venv comes first (pos_scripts/install.sh without --no-core makes it)"
  PYTHONPATH=$ROOT "$PY" -m interop_runner.config.needs "$@"
}

# ------------------------------------------------------------------------------ arguments --
configs=() impls=() bases=() tools=() notebook=0 tests=0 all=0 plan=0 core=1
while (($#)); do
  case $1 in
    --for | --impl | --base | --tool)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --for) [[ -f $2 ]] || die "--for: no campaign file '$2'"; configs+=("$2") ;;
        --impl) impls+=("$2") ;;
        --base) bases+=("$2") ;;
        --tool) [[ $2 == inferno ]] || die "--tool: unknown tool '$2' (known: inferno)"
                tools+=("$2") ;;
      esac
      shift 2 ;;
    --notebook) notebook=1; shift ;;
    --tests) tests=1; shift ;;
    --all) all=1; shift ;;
    --plan) plan=1; shift ;;
    --no-core) core=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
# no target named: all of them
((${#configs[@]} + ${#impls[@]} + ${#bases[@]} + ${#tools[@]} + notebook + tests)) || all=1
((all)) && notebook=1 tests=1

# targets: one "KIND NAME" line each (impl, base, tool), from the package's plan
targets() {
  local args=(plan)
  ((all)) && args+=(--all)
  local c i
  for c in "${configs[@]}"; do args+=(--for "$c"); done
  for i in "${impls[@]}"; do args+=(--impl "$i"); done
  helper "${args[@]}"
  for i in "${bases[@]}"; do echo "base $i"; done
  for i in "${tools[@]}"; do echo "tool $i"; done
}

if ((plan)); then
  ((core)) && echo core
  ((notebook)) && echo notebook
  ((tests)) && echo tests
  targets | sort -u
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (it installs Debian packages)"
command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian 12"

# ------------------------------------------------------------------------ Debian packages --
apt_updated=0
# apt_install PKG...: install those not installed yet
apt_install() {
  local missing=() pkg status
  for pkg in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ((!apt_updated)); then
    apt-get update -qq
    apt_updated=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# the packages listed one per line in a file (# starts a comment)
list_packages() {
  local pkg
  [[ -e $1 ]] || return 0
  while read -r pkg _; do
    [[ -n $pkg && $pkg != \#* ]] && echo "$pkg"
  done <"$1"
  return 0
}

# ----------------------------------------------------------------------------- Python venv --
# pip_install REQUIREMENTS: into the venv with uv (pinned in requirements.txt), pip without it
pip_install() {
  if [[ ! -x $VENV/bin/uv ]]; then
    "$VENV/bin/pip" install -q "$(grep -m1 '^uv==' "$ROOT/requirements.txt")"
  fi
  # the platform's certificates, as pip (Debian's ca-certificates)
  UV_SYSTEM_CERTS=${UV_SYSTEM_CERTS:-1} "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" \
    -r "$1"
}

# the first section of requirements.txt: what run.py needs
core_requirements() { sed '/^# --- notebook/,$d' "$ROOT/requirements.txt"; }

venv_core() {
  local stamp=$VENV/.qir-core want
  want=$(core_requirements |
    cat - "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT/interop_runner/parsers/_speedups.c" |
    sha256sum | cut -d' ' -f1)
  [[ -x $VENV/bin/python && $(cat "$stamp" 2>/dev/null) == "$want" ]] && return 0
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"  # with pip, for users
  local core
  core=$(mktemp)
  core_requirements >"$core"
  pip_install "$core"
  rm -f "$core"
  # the `qir` command, and the parsers' compiled loops (interop_runner/parsers/_speedups.c)
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps --no-build-isolation \
    -e "$ROOT"
  echo "$want" >"$stamp"
}

venv_notebook() {
  local stamp=$VENV/.qir-all want
  want=$(sha256sum "$ROOT/requirements.txt" | cut -d' ' -f1)
  if [[ $(cat "$stamp" 2>/dev/null) != "$want" ]]; then
    pip_install "$ROOT/requirements.txt"
    echo "$want" >"$stamp"
  fi
  # the Jupyter kernel the notebooks (and their tests) run in: the venv's own python3
  if [[ ! -e $VENV/share/jupyter/kernels/python3/kernel.json ]]; then
    "$VENV/bin/python" -m ipykernel install --sys-prefix >/dev/null
  fi
}

# venv_bytecode: every module of the venv and of the package compiled once, here. Where
# PYTHONDONTWRITEBYTECODE is set (this machine and CI set it) no process writes .pyc files when
# it imports, so each one compiled pandas, matplotlib and scipy again: about 2 s of CPU before
# any work, for every run.py, notebook kernel and test subprocess (imports of the analysis and
# report took 3.6 s, 1.6 s compiled). uv does not compile when it installs; compileall skips
# what is current (0.4 s when nothing changed).
venv_bytecode() {
  "$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" "$ROOT/interop_runner" >/dev/null
}

# ----------------------------------------------------------------- implementation caches --
go_bin() {
  local go
  go=$(command -v go || true)
  [[ -n $go ]] || go=/usr/local/go/bin/go
  if [[ ! -x $go ]]; then
    log "Go not found: installing Debian's golang-go"
    apt_install golang-go
    go=$(command -v go)
  fi
  local minor
  minor=$("$go" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
  ((minor >= GO_MIN_MINOR)) ||
    die "Go $("$go" env GOVERSION) is too old: quic-go needs go1.$GO_MIN_MINOR or newer on PATH or in /usr/local/go"
  echo "$go"
}

cargo_bin() {
  local cargo
  cargo=$(command -v cargo || true)
  echo "${cargo:-$HOME/.cargo/bin/cargo}"
}

# go_modules DIR: its modules and the other releases its variants use (variant-versions)
go_modules() {
  local dir=$1 go module version cached tmp
  go=$(go_bin)
  (cd "$dir" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go" mod download)
  [[ -e $dir/variant-versions ]] || return 0
  while read -r module version _; do
    [[ -n $module && $module != \#* ]] || continue
    cached=$("$go" env GOMODCACHE)/cache/download/$module/@v/$version.zip
    [[ -e $cached ]] && continue
    log "Go module $module@$version (variant builds)"
    tmp=$(mktemp -d)
    cp -r "$dir"/. "$tmp/"
    (cd "$tmp" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" get "$module@$version" &&
      GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" list -deps ./... >/dev/null)
    rm -rf "$tmp"
  done <"$dir/variant-versions"
}

# impl_caches NAME: fill the offline caches the nodes build implementations/NAME from; print
# the cache paths filled (for the stamp)
impl_caches() {
  local name=$1 dir=$ROOT/implementations/$1 cargo tmp
  if [[ -e $dir/requirements.txt ]]; then
    mkdir -p "$WHEELS"
    "$PY" -m pip download -q --only-binary=:all: --dest "$WHEELS" -r "$dir/requirements.txt"
    echo "$WHEELS"
  fi
  if [[ -e $dir/go.mod ]]; then
    go_modules "$dir"
    echo "$("$(go_bin)" env GOMODCACHE)/cache/download"
  fi
  if [[ -e $dir/Cargo.toml ]]; then
    cargo=$(cargo_bin)
    [[ -x $cargo ]] || die "cargo not found: $dir needs Rust (rustup)"
    "$cargo" fetch -q --locked --manifest-path "$dir/Cargo.toml"
    echo "${CARGO_HOME:-$HOME/.cargo}/registry/cache"
  fi
  if [[ -e $dir/package-lock.json ]]; then
    command -v npm >/dev/null || die "npm not found: $dir needs Node.js/npm"
    tmp=$(mktemp -d)
    cp "$dir/package.json" "$dir/package-lock.json" "$tmp/"
    npm ci --prefix "$tmp" --cache "$NPM_CACHE" --ignore-scripts --no-audit --no-fund \
      --loglevel=error >/dev/null
    rm -rf "$tmp"
    echo "$NPM_CACHE"
  fi
  # upstream source archives (meta.yml `sources:`, SHA-256 checked): from a local source
  # directory ($QIR_SOURCE_DIRS, else <checkout>/../shared/sources, then this workplace's
  # /work/shared/sources) or downloaded from their pinned URLs; "FILE: how, ... (PATH)" lines
  if grep -q '^sources:' "$dir/meta.yml"; then
    QIR_SOURCE_DIRS="${QIR_SOURCE_DIRS:-$ROOT/../shared/sources:/work/shared/sources}" \
      "$PY" "$ROOT/run.py" sources "$name" | sed -nE 's/.*\((\/[^()]*)\)$/\1/p'
  fi
}

install_impl() {
  local paths
  paths=$(impl_caches "$1")
  # shellcheck disable=SC2086  # one path per line, none with spaces
  helper stamp impl "$1" $paths
}

install_base() {
  local tar
  tar=$("$ROOT/pos_scripts/build-base-image.sh" "$1")
  helper stamp base "$1" "$tar"
}

install_inferno() {
  local cargo
  cargo=$(cargo_bin)
  if [[ ! -x $cargo ]]; then
    log "cargo not found: flame graphs (inferno) unavailable; install Rust to get them"
  elif ! "$cargo" install --list | grep -q "^inferno v$INFERNO_VERSION:" \
      || [[ ! -x ${CARGO_HOME:-$HOME/.cargo}/bin/inferno-flamegraph ]]; then
    # (cargo's list says what it installed, not whether the binaries are still there)
    "$cargo" install -q inferno --version "$INFERNO_VERSION" --locked --force
  fi
}

# -------------------------------------------------------------------------------- the run --
if ((core)); then
  step "Debian packages (core)" apt_install "${CORE_PACKAGES[@]}"
  # Debian starts nginx/ssh after install where systemd runs; the runner starts its own ones.
  step "python venv" venv_core
fi
((notebook)) && step "python venv: notebook, tests, type checks" venv_notebook
((core || notebook)) && step "python bytecode" venv_bytecode

plan_lines=$(targets | sort -u)
want_impls=() want_bases=()
while read -r kind name; do
  case $kind in
    impl) want_impls+=("$name") ;;
    base) want_bases+=("$name") ;;
  esac
done <<<"$plan_lines"

# Debian packages of the targets: the implementations' apt-packages, the engines for images
extra=()
for name in "${want_impls[@]}"; do
  mapfile -t -O "${#extra[@]}" extra < <(list_packages "$ROOT/implementations/$name/apt-packages")
done
((${#want_bases[@]})) && extra+=("${IMAGE_PACKAGES[@]}")
((tests)) && extra+=("${TEST_PACKAGES[@]}" "${IMAGE_PACKAGES[@]}")
# docker.io's docker.service and containerd.service may start too: each local-testbed node runs
# its own dockerd and containerd (interop_runner/testbed/local/engines.py), which never use
# /var/run/docker.sock or /run/containerd, so whether the host's engine runs does not matter.
((${#extra[@]})) && step "Debian packages (targets)" apt_install "${extra[@]}"
if ((${#want_bases[@]} || tests)); then
  for tool in dockerd docker containerd runc mmdebstrap; do
    PATH=$PATH:/usr/sbin:/sbin command -v "$tool" >/dev/null ||
      die "$tool not found although its package is installed (docker.io, containerd, runc, mmdebstrap)"
  done
fi
# busybox-static: the engine tests' image (tests/test_testbed_docker.py), made offline
if ((tests)) && ! command -v busybox >/dev/null; then
  die "busybox not found although busybox-static is installed"
fi

todo=$(helper missing <<<"$plan_lines")
while read -r kind name; do
  case $kind in
    impl) step "caches for $name" install_impl "$name" ;;
    base) step "base image $name (mmdebstrap; cached)" install_base "$name" ;;
    tool) step "inferno $INFERNO_VERSION (flame graphs)" install_inferno ;;
  esac
done <<<"$todo"
log "done"
