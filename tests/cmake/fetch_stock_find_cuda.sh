#!/usr/bin/env bash
# Fetches Debian's unpatched FindCUDAToolkit.cmake (the installed cmake-data's version) into .deps/.
#   tests/cmake/fetch_stock_find_cuda.sh    prints the folder holding it (for CMAKE_MODULE_PATH)
# The build machines carry a patched copy of that module, so configuring braid there proves
# nothing about a user's fresh Debian; tests/cmake/configure_check.sh configures against this one.
# The module includes its two helpers from its own folder, so they come along (same package).
# Exits 3 when the cmake on PATH is not Debian's (there is no Debian module to compare with), 1
# when the module cannot be had; only the folder goes to stdout.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
me=fetch_stock_find_cuda.sh
die() { echo "$me: $*" >&2; exit 1; }

if ! version=$(dpkg-query -W -f='${Version}' cmake-data 2>/dev/null) || [ -z "$version" ]; then
  echo "$me: cmake-data is not an installed Debian package; no stock module to fetch" >&2
  exit 3
fi
upstream=${version#*:}
upstream=${upstream%-*}                     # 1:3.25.1-1 -> 3.25.1
cmake_version=$(cmake --version | sed -n '1s/^cmake version //p')
if [ "$cmake_version" != "$upstream" ]; then
  echo "$me: the cmake on PATH ($(command -v cmake), $cmake_version) is not Debian's" \
       "(cmake-data $version)" >&2
  exit 3
fi
modules=usr/share/cmake-${upstream%.*}/Modules
files=(FindCUDAToolkit.cmake FindPackageHandleStandardArgs.cmake FindPackageMessage.cmake)
dest=$root/.deps/cmake-stock/$version

# dpkg recorded the packaged files' checksums at install time, before anyone patched them: the
# fetched files must match, which proves they are the stock ones (and that nothing was cut short).
sums=/var/lib/dpkg/info/cmake-data.md5sums
verify() {
  local dir=$1 f want got
  for f in "${files[@]}"; do
    [ -s "$dir/$f" ] || return 1
    [ -r "$sums" ] || continue
    want=$(awk -v p="$modules/$f" '$2 == p { print $1 }' "$sums")
    got=$(md5sum "$dir/$f" | cut -d' ' -f1)
    [ -z "$want" ] || [ "$want" = "$got" ] || return 1
  done
}

if ! verify "$dest" 2>/dev/null; then
  mkdir -p "$root/.deps/cmake-stock"
  tmp=$(mktemp -d "$root/.deps/cmake-stock/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # apt keeps the package it installed unless its cache was cleaned; else download that version.
  deb=/var/cache/apt/archives/cmake-data_${version//:/%3a}_all.deb
  if [ ! -s "$deb" ]; then
    # Quiet unless it fails: as root, apt warns that its sandbox user cannot write here.
    if ! (cd "$tmp" && apt-get download "cmake-data=$version") >"$tmp/apt.log" 2>&1; then
      # A fresh machine may have no package lists yet: refresh them once, as install_deps.sh does.
      sudo=""
      [ "$(id -u)" -eq 0 ] || sudo=sudo
      $sudo apt-get update -qq >>"$tmp/apt.log" 2>&1 || true
      if ! (cd "$tmp" && apt-get download "cmake-data=$version") >>"$tmp/apt.log" 2>&1; then
        cat "$tmp/apt.log" >&2
        die "could not download cmake-data $version (above); set BRAID_CONFIGURE_CHECK=0 to skip"
      fi
    fi
    deb=$(ls "$tmp"/cmake-data_*.deb)
  fi
  mkdir -p "$tmp/out"
  members=()
  for f in "${files[@]}"; do members+=("./$modules/$f"); done
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp/out" "${members[@]}" ||
    die "could not extract ${files[*]} from $deb"
  verify "$tmp/out/$modules" ||
    die "the modules extracted from $deb do not match the checksums in $sums"
  rm -rf "$dest"
  mkdir -p "$dest"
  mv "$tmp/out/$modules"/* "$dest/"
fi

installed=/$modules/FindCUDAToolkit.cmake
if cmp -s "$dest/FindCUDAToolkit.cmake" "$installed"; then
  echo "$me: stock module (cmake-data $version); the installed one is the same" >&2
else
  echo "$me: stock module (cmake-data $version); the installed one differs (patched)" >&2
fi
echo "$dest"
