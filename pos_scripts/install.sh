#!/usr/bin/env bash
# Install what the management node and the local testbed need, idempotently:
# Debian packages, the Python venv (.venv) from requirements.txt, and the Go modules of the
# implementations (so nodes without internet, such as the local namespaces, can build offline).
# Usage: pos_scripts/install.sh            (as root on Debian 12)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PACKAGES=(openssh-server openssh-client nginx curl iproute2 ethtool procps util-linux
          coreutils b3sum openssl python3 python3-venv git shellcheck ca-certificates
          sysstat linux-perf tcpdump ifstat hwloc-nox zstd iptables iputils-ping
          chromium chromium-driver fonts-dejavu-core docker.io mmdebstrap busybox-static
          gcc libc6-dev python3-dev)  # the last three: the parsers' compiled loops (setup.py)
GO_MIN_MINOR=26

log() { printf '[install] %s\n' "$*" >&2; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (it installs Debian packages)"
command -v apt-get >/dev/null || die "apt-get not found: this script supports Debian 12"

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$pkg")
done
# Debian packages the implementations need (one name per line in implementations/*/apt-packages).
for list in "$ROOT"/implementations/*/apt-packages; do
  [[ -e $list ]] || continue
  while read -r pkg _; do
    [[ -n $pkg && $pkg != \#* ]] || continue
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$pkg")
  done <"$list"
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts nginx/ssh after install where systemd runs; the runner starts its own instances.
# The same holds for docker.io's docker.service and containerd.service: each local-testbed node
# runs its own dockerd and containerd (interop_runner/testbed/local/engines.py), which never use
# /var/run/docker.sock or /run/containerd, so whether the host's engine runs does not matter.
# docker.io: the nodes' engines; mmdebstrap: base images (build-base-image.sh); busybox-static:
# the test image of tests/test_testbed_docker.py (made offline).
for tool in dockerd docker containerd runc mmdebstrap busybox; do
  PATH=$PATH:/usr/sbin:/sbin command -v "$tool" >/dev/null ||
    die "$tool not found although its package is installed (docker.io, containerd, runc, mmdebstrap, busybox-static)"
done

# Go toolchain for quic-go (needs Go >= 1.$GO_MIN_MINOR).
go_bin=$(command -v go || true)
[[ -n $go_bin ]] || go_bin=/usr/local/go/bin/go
if [[ ! -x $go_bin ]]; then
  log "Go not found: installing Debian's golang-go"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
  go_bin=$(command -v go)
fi
go_minor=$("$go_bin" env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
if ((go_minor < GO_MIN_MINOR)); then
  die "Go $("$go_bin" env GOVERSION) is too old: quic-go needs go1.$GO_MIN_MINOR or newer on PATH or in /usr/local/go"
fi

log "Python environment: $ROOT/.venv"
if [[ ! -x $ROOT/.venv/bin/python ]]; then
  python3 -m venv "$ROOT/.venv"
fi
"$ROOT/.venv/bin/pip" install -q -r "$ROOT/requirements.txt"
# the `qir` command, and the parsers' compiled loops (interop_runner/parsers/_speedups.c)
"$ROOT/.venv/bin/pip" install -q --no-deps --no-build-isolation -e "$ROOT"
# the Jupyter kernel the notebooks (and their tests) run in: the venv's own python3
if [[ ! -e $ROOT/.venv/share/jupyter/kernels/python3/kernel.json ]]; then
  "$ROOT/.venv/bin/python" -m ipykernel install --sys-prefix >/dev/null
fi

log "Python wheels for implementations (offline installs on the nodes)"
mkdir -p /var/cache/qir/wheels
for req in "$ROOT"/implementations/*/requirements.txt; do
  [[ -e $req ]] || continue
  "$ROOT/.venv/bin/pip" download -q --only-binary=:all: --dest /var/cache/qir/wheels -r "$req"
done

log "Go modules for implementations (offline builds on the nodes)"
for gomod in "$ROOT"/implementations/*/go.mod; do
  [[ -e $gomod ]] || continue
  (cd "$(dirname "$gomod")" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go_bin" mod download)
done
# Other releases of Go implementations, for variants (implementations/<name>/variant-versions).
for list in "$ROOT"/implementations/*/variant-versions; do
  impl_dir=$(dirname "$list")
  [[ -e $list && -e $impl_dir/go.mod ]] || continue
  while read -r module version _; do
    [[ -n $module && $module != \#* ]] || continue
    cached=$("$go_bin" env GOMODCACHE)/cache/download/$module/@v/$version.zip
    [[ -e $cached ]] && continue
    log "Go module $module@$version (variant builds)"
    tmp=$(mktemp -d)
    cp -r "$impl_dir"/. "$tmp/"
    (cd "$tmp" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go_bin" get "$module@$version" &&
      GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go_bin" list -deps ./... >/dev/null)
    rm -rf "$tmp"
  done <"$list"
done
cargo_bin=$(command -v cargo || true)
[[ -n $cargo_bin ]] || cargo_bin=$HOME/.cargo/bin/cargo
log "Rust crates for implementations (offline builds on the nodes)"
for manifest in "$ROOT"/implementations/*/Cargo.toml; do
  [[ -e $manifest ]] || continue
  [[ -x $cargo_bin ]] || die "cargo not found: $(dirname "$manifest") needs Rust (rustup)"
  "$cargo_bin" fetch -q --locked --manifest-path "$manifest"
done
log "npm packages for implementations (offline installs on the nodes)"
for lock in "$ROOT"/implementations/*/package-lock.json; do
  [[ -e $lock ]] || continue
  command -v npm >/dev/null || die "npm not found: $(dirname "$lock") needs Node.js/npm"
  tmp=$(mktemp -d)
  cp "$(dirname "$lock")/package.json" "$lock" "$tmp/"
  npm ci --prefix "$tmp" --cache /var/cache/qir/npm --ignore-scripts --no-audit --no-fund \
    --loglevel=error >/dev/null
  rm -rf "$tmp"
done
# Flame graphs (management node): inferno from crates.io, pinned.
INFERNO_VERSION=0.12.8
if [[ -x $cargo_bin ]] && "$cargo_bin" install --list | grep -q "^inferno v$INFERNO_VERSION:"; then
  :
elif [[ -x $cargo_bin ]]; then
  log "building inferno $INFERNO_VERSION (flame graphs)"
  "$cargo_bin" install -q inferno --version "$INFERNO_VERSION" --locked
else
  log "cargo not found: flame graphs (inferno) unavailable; install Rust to get them"
fi
# Upstream source archives of the C implementations (meta.yml `sources:`, SHA-256 checked):
# from a local source directory ($QIR_SOURCE_DIRS, else <checkout>/../shared/sources, then this
# workplace's /work/shared/sources) or downloaded from their pinned URLs.
log "source archives for implementations (offline builds on the nodes)"
export QIR_SOURCE_DIRS="${QIR_SOURCE_DIRS:-$ROOT/../shared/sources:/work/shared/sources}"
"$ROOT/.venv/bin/python" "$ROOT/run.py" sources >/dev/null
# Base images of the image implementations (management node; the runner imports them on each
# node's engine): Debian root file systems made with mmdebstrap, cached by their package list.
for base in "$ROOT"/implementations/_shared/image-bases/*/; do
  [[ -d $base ]] || continue
  log "base image $(basename "$base") (mmdebstrap; cached)"
  "$ROOT/pos_scripts/build-base-image.sh" "$(basename "$base")" >/dev/null
done
log "done"
