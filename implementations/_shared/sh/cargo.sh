# shellcheck shell=bash
# The `setup` and `version` of the Rust harnesses (quiche, quinn, s2n-quic, msquic), sourced from
# <implementations>/_shared/sh/ (meta.yml `shared: [rust, sh]`). Each harness is a crate with
# src/bin/{server,client}.rs, Cargo.toml and Cargo.lock, depending on the shared crate
# ../_shared/rust/qir-harness.

# qir_cargo_setup NAME CRATE_DIR [NOTE]: builds the crate in CRATE_DIR and installs its server
# and client binaries into $SETUP_DIR/NAME/bin/.
#
# - Offline and locked: the crates were fetched beforehand (`cargo fetch --locked` on the
#   management host, pos_scripts/install.sh).
# - Cached: a stamp holds the sha256 of the crate's sources, Cargo.toml, Cargo.lock and the
#   shared Rust sources (../_shared/rust), plus `rustc -V`; an unchanged setup with both
#   binaries present returns at once.
# - The cargo target dir is shared per host (${QIR_BUILD_CACHE:-/var/cache/qir/build}/NAME/target,
#   the two namespaces of the local testbed are one host) and guarded by flock.
# - The binaries are installed under a temporary name and renamed, so a running one is never
#   overwritten in place. On failure the last 30 lines of the build log go to stderr (the runner
#   records them). NOTE is added to the "building" message.
qir_cargo_setup() {
  local name=$1 crate=$2 note=${3:-}
  : "${SETUP_DIR:?SETUP_DIR is not set}"
  crate="$(cd "$crate" && pwd)"
  local out="$SETUP_DIR/$name"
  local bin="$out/bin" stamp="$out/build.stamp" log="$out/build.log"

  # cargo/rustup need HOME (registry cache and toolchains in $HOME/.cargo, $HOME/.rustup).
  if [[ -z "${HOME:-}" ]]; then
    HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"
    export HOME
  fi
  # rustup's default place comes last: a cargo already in PATH wins
  export PATH="$PATH:$HOME/.cargo/bin"
  local cargo rustc
  cargo="$(command -v cargo || true)"
  rustc="$(dirname "${cargo:-.}")/rustc"
  [[ -x "$rustc" ]] || rustc="$(command -v rustc || true)"
  if [[ -z "$cargo" || -z "$rustc" ]]; then
    echo "$name setup: cargo/rustc not found (looked in PATH and $HOME/.cargo/bin)" >&2
    exit 1
  fi

  local want
  want="$(_qir_cargo_sources_hash "$crate") $("$rustc" -V)"
  if _qir_cargo_up_to_date "$stamp" "$want" "$bin"; then
    return 0
  fi

  mkdir -p "$bin"
  local cache="${QIR_BUILD_CACHE:-/var/cache/qir/build}/$name"
  mkdir -p "$cache"
  export CARGO_TARGET_DIR="$cache/target"
  # Serialise the setups sharing the target dir (e.g. the two namespaces of one host).
  if command -v flock >/dev/null; then
    exec 9>"$cache/.lock"
    flock 9
  else
    echo "$name setup: flock not found, building without the lock on $cache" >&2
  fi
  # Another setup with the same SETUP_DIR may have finished while this one waited.
  if _qir_cargo_up_to_date "$stamp" "$want" "$bin"; then
    return 0
  fi

  rm -f "$stamp"
  echo "$name setup: building with $("$rustc" -V) into $CARGO_TARGET_DIR (log: $log)${note:+ ($note)}" >&2
  if ! (cd "$crate" && "$cargo" build --release --locked --offline --bins \
    --manifest-path "$crate/Cargo.toml") >"$log" 2>&1; then
    echo "$name setup: build failed, last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  local b
  for b in server client; do
    install -m 0755 "$CARGO_TARGET_DIR/release/$b" "$bin/.$b.new"
    mv -f "$bin/.$b.new" "$bin/$b"
  done
  echo "$want" >"$stamp"
}

# _qir_cargo_sources_hash CRATE_DIR: sha256 over what the build depends on besides the registry
# crates: the crate's *.rs, Cargo.toml and Cargo.lock, and the shared crates in ../_shared/rust.
_qir_cargo_sources_hash() {
  (
    cd "$1" || exit 1
    {
      find src -name '*.rs' -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
      sha256sum Cargo.toml Cargo.lock
      if [[ -d ../_shared/rust ]]; then
        find ../_shared/rust \( -name target -prune \) -o -type f \( -name '*.rs' -o -name Cargo.toml \) -print0 |
          LC_ALL=C sort -z | xargs -0 -r sha256sum
      fi
    } | sha256sum | cut -d' ' -f1
  )
}

# _qir_cargo_up_to_date STAMP WANT BIN_DIR: true when STAMP holds WANT and both binaries exist.
_qir_cargo_up_to_date() {
  [[ -f "$1" && "$(cat "$1")" == "$2" && -x "$3/server" && -x "$3/client" ]]
}

# qir_cargo_lock_version PACKAGE CRATE_DIR: prints the version of PACKAGE pinned in
# CRATE_DIR/Cargo.lock (what setup builds with --locked); exit 1 when it is not there.
qir_cargo_lock_version() {
  local lock="$2/Cargo.lock" v
  v="$(awk -v pkg="$1" '$0 == "name = \"" pkg "\"" { getline; gsub(/^version = "|"$/, ""); print; exit }' "$lock")"
  if [[ -z "$v" ]]; then
    echo "$1 version: $1 not found in $lock" >&2
    exit 1
  fi
  echo "$v"
}
