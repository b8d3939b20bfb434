#!/usr/bin/env bash
# Empty what install.sh, quickstart.sh and the test suite fill, so the next run is a fresh
# machine's (docs/testing.md, docs/benchmarks.md "Quickstart time on an emptied machine"):
# the local testbed down with its scratch tmpfs and engines' image caches, /var/cache/qir
# (wheels, npm, source archives, base images, Rust build directories, install stamps),
# /var/tmp/qir (node work directories and builds), /var/lib/qir, the Go module and build
# caches, Cargo's registry and the inferno binaries (the toolchains themselves stay), the
# pip, uv, npm and matplotlib caches, and the checkout's .venv. Debian packages stay installed (purging them needs the list the
# machine's first install.sh added, which no file keeps).
#
# Usage (root): bench/empty_machine.sh [CHECKOUT]   (CHECKOUT: whose .venv goes; default .)
set -euo pipefail
checkout=${1:-.}
if [[ -x $checkout/.venv/bin/python ]]; then
  (cd "$checkout" && .venv/bin/python run.py testbed down --purge) || true
fi
rm -rf /var/cache/qir /var/tmp/qir /var/lib/qir
rm -rf "$(go env GOMODCACHE 2>/dev/null || echo /root/go/pkg/mod)" \
  "$(go env GOCACHE 2>/dev/null || echo /root/.cache/go-build)" /root/.cargo/registry \
  /root/.cache/pip /root/.cache/uv /root/.npm /root/.cache/matplotlib /root/.cache/qir
# through cargo: install.sh asks `cargo install --list`, which a removed binary does not change
if command -v cargo >/dev/null; then cargo uninstall -q inferno 2>/dev/null || true; fi
rm -rf "${checkout:?}/.venv"
echo "emptied"
