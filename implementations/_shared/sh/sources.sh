# shellcheck shell=bash
# Upstream source archives of the C implementations (meta.yml `sources:`), sourced by their
# `setup` from <implementations>/_shared/sh/ (meta.yml `shared: [sh]`).
#
# The runner copies every archive an implementation names, checked by SHA-256 on the management
# node, into one directory on the node and passes it as QIR_SOURCES; a node never downloads
# them. The setup checks each archive again before unpacking it, so a file changed on the node
# is refused as well.

# qir_source NAME FILE SHA256: print the path of FILE in $QIR_SOURCES after checking its
# SHA-256; a missing or different file is a one-line error (exit 1) naming the file and the
# expected hash.
qir_source() {
  local name=$1 file=$2 want=$3 path got
  : "${QIR_SOURCES:?QIR_SOURCES is not set (the runner passes the directory of source archives on the node)}"
  path="$QIR_SOURCES/$file"
  if [[ ! -f $path ]]; then
    echo "$name setup: source archive $path not found (expected SHA-256 $want)" >&2
    exit 1
  fi
  got="$(sha256sum -- "$path" | cut -d' ' -f1)"
  if [[ $got != "$want" ]]; then
    echo "$name setup: source archive $path has SHA-256 $got, expected $want" >&2
    exit 1
  fi
  printf '%s\n' "$path"
}

# qir_unpack ARCHIVE DEST: unpack a .tar.gz (or a .crate) into DEST, dropping its one top-level
# directory; DEST is replaced.
qir_unpack() {
  local archive=$1 dest=$2
  rm -rf "$dest"
  mkdir -p "$dest"
  tar -xzf "$archive" -C "$dest" --strip-components=1
}
