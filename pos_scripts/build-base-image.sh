#!/usr/bin/env bash
# Builds the base image of the container-image implementations as a root file system tarball,
# with mmdebstrap from Debian's archive:
#
#   pos_scripts/build-base-image.sh [--dry-run] NAME
#
# NAME names implementations/_shared/image-bases/NAME/ with the files
#   suite      the Debian suite, e.g. trixie
#   packages   one Debian package per line (# starts a comment)
# The tarball is /var/cache/qir/images/NAME-<key>.tar, <key> = the first 12 hex digits of the
# SHA-256 over the suite, the sorted packages and BUILD_VERSION below; an existing tarball with
# that key is reused at once. NAME.json beside it records {name, key, tar, sha256, suite,
# packages, built_at} (written atomically). The tar path is printed on stdout, nothing else.
# --dry-run prints the tar path (with its key) and builds nothing.
# The runner `docker import`s the tar as qir-base/NAME:<key> on each node's engine; the image
# Dockerfiles build FROM it and install nothing (the nodes have no internet).
#
# Runs as root on the management host (mmdebstrap needs the archive). Environment overrides:
#   QIR_IMAGE_BASES   folder of the base descriptions (default: implementations/_shared/image-bases)
#   QIR_IMAGE_CACHE   output folder (default: /var/cache/qir/images)
#   QIR_DEBIAN_MIRROR Debian mirror (default: http://deb.debian.org/debian; not part of the key)
set -euo pipefail

# Bump when the way the image is built changes (mmdebstrap options, clean-up): a new key.
BUILD_VERSION=1
prog=build-base-image
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bases="${QIR_IMAGE_BASES:-$root/implementations/_shared/image-bases}"
cache="${QIR_IMAGE_CACHE:-/var/cache/qir/images}"
mirror="${QIR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

die() {
  printf '%s: %s\n' "$prog" "$*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

dry_run=0
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  --dry-run) dry_run=1; shift ;;
esac
case "${1:-}" in
  "") die "usage: $0 [--dry-run] NAME (a folder of implementations/_shared/image-bases)" ;;
  -*) die "unknown option '$1' (usage: $0 [--dry-run] NAME)" ;;
esac
(($# == 1)) || die "usage: $0 [--dry-run] NAME (one name, got $#)"
name=$1
[[ $name =~ ^[a-z0-9][a-z0-9._-]{0,63}$ ]] || die "invalid base name '$name'"
dir="$bases/$name"
[[ -d $dir ]] || die "no base '$name' (no folder $dir)"
[[ -f $dir/suite ]] || die "$dir/suite is missing"
[[ -f $dir/packages ]] || die "$dir/packages is missing"

# the suite: the first word of the first non-comment line
suite="$(sed -e 's/#.*//' "$dir/suite" | awk 'NF { print $1; exit }')"
[[ $suite =~ ^[a-z][a-z0-9-]{1,31}$ ]] || die "$dir/suite: invalid suite '$suite'"

# the packages: one a line, comments and blank lines left out, sorted and unique
packages=()
lineno=0
while IFS= read -r line || [[ -n $line ]]; do
  lineno=$((lineno + 1))
  line="${line%%#*}"
  read -r -a words <<<"$line"
  ((${#words[@]} > 0)) || continue
  ((${#words[@]} == 1)) || die "$dir/packages:$lineno: one package per line, got '${words[*]}'"
  [[ ${words[0]} =~ ^[a-z0-9][a-z0-9+.-]+$ ]] ||
    die "$dir/packages:$lineno: invalid package name '${words[0]}'"
  packages+=("${words[0]}")
done <"$dir/packages"
((${#packages[@]} > 0)) || die "$dir/packages lists no package"
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | LC_ALL=C sort -u)

key="$({
  printf 'suite=%s\n' "$suite"
  printf 'package=%s\n' "${packages[@]}"
  printf 'build_version=%s\n' "$BUILD_VERSION"
} | sha256sum | cut -c1-12)"
tar="$cache/$name-$key.tar"
meta="$cache/$name.json"

# write_meta SHA256 BUILT_AT: NAME.json, atomically (a temporary file renamed over it)
write_meta() {
  local tmp pkgs
  tmp="$(mktemp "$cache/.$name.json.XXXXXX")"
  pkgs="$(printf '"%s", ' "${packages[@]}")"
  printf '{"name": "%s", "key": "%s", "tar": "%s", "sha256": "%s", "suite": "%s", "packages": [%s], "built_at": "%s"}\n' \
    "$name" "$key" "$tar" "$1" "$suite" "${pkgs%, }" "$2" >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$meta"
}

# meta_is_current: NAME.json describes this very tarball
meta_is_current() {
  [[ -f $meta ]] && grep -qF "\"key\": \"$key\"" "$meta" && grep -qF "\"tar\": \"$tar\"" "$meta"
}

if ((dry_run)); then
  printf '%s\n' "$tar"
  exit 0
fi

# the quick way out: this key is built already
if [[ -f $tar ]]; then
  if ! meta_is_current; then
    # the tarball exists but NAME.json does not describe it: describe it again
    write_meta "$(sha256sum "$tar" | cut -d' ' -f1)" "$(date -u -r "$tar" +%Y-%m-%dT%H:%M:%SZ)"
  fi
  printf '%s\n' "$tar"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (mmdebstrap builds the image in a chroot)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found (apt-get install mmdebstrap)"
mkdir -p "$cache" || die "cannot create $cache"

# One build per base at a time (e.g. two nodes prepared in parallel on one host); whoever waited
# finds the tarball built.
exec 9>"$cache/.$name.lock"
flock 9 || die "cannot lock $cache/.$name.lock"
if [[ -f $tar ]] && meta_is_current; then
  printf '%s\n' "$tar"
  exit 0
fi

partial="$(mktemp "$cache/.$name-$key.XXXXXX.tar")"
log="$cache/$name-$key.log"
trap 'rm -f "$partial"' EXIT
# --variant=apt: only Essential packages and apt, plus the listed ones (no Recommends);
# documentation and translations are left out; apt's lists and caches are removed.
include="$(IFS=,; printf '%s' "${packages[*]}")"
# shellcheck disable=SC2016 # $1 is expanded by mmdebstrap's hook shell (the chroot's path)
if ! mmdebstrap --variant=apt --mode=root --format=tar \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --include="$include" \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/apt "$1"/var/log/*.log "$1"/var/cache/debconf/*-old' \
  "$suite" "$partial" "$mirror" >"$log" 2>&1; then
  die "mmdebstrap failed for $name ($suite), log $log: $(tail -n 1 "$log")"
fi
chmod 0644 "$partial"
mv -f "$partial" "$tar"
trap - EXIT
rm -f "$log"
write_meta "$(sha256sum "$tar" | cut -d' ' -f1)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
printf '%s\n' "$tar"
