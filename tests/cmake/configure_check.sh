#!/usr/bin/env bash
# CI check that braid configures where users configure it, not only on the build machines:
# against Debian's stock FindCUDAToolkit (theirs is patched) and with no CUDA toolkit in sight.
#   tests/cmake/configure_check.sh        env: BRAID_CONFIGURE_CHECK=0 skips it
# Configure and generate only, in a scratch folder removed afterwards: seconds, nothing compiled.
# Any failure prints the configure log and exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
me=configure_check.sh
if [ "${BRAID_CONFIGURE_CHECK:-1}" = 0 ]; then
  echo "$me: skipped (BRAID_CONFIGURE_CHECK=0)"
  exit 0
fi
cmake=$(command -v cmake)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/braid-configure-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# check NAME EXPECTED COMMAND...: runs a configure, which must succeed and print EXPECTED.
check() {
  local name=$1 expected=$2 start=$SECONDS
  shift 2
  if ! "$@" >"$scratch/$name.log" 2>&1; then
    cat "$scratch/$name.log" >&2
    trap - EXIT
    echo "$me: $name: configure FAILED (log above; build folder kept: $scratch/$name)" >&2
    exit 1
  fi
  if ! grep -qF -- "$expected" "$scratch/$name.log"; then
    cat "$scratch/$name.log" >&2
    trap - EXIT
    echo "$me: $name: configured, but the log above lacks '$expected' (kept: $scratch)" >&2
    exit 1
  fi
  echo "$me: $name: ok ($((SECONDS - start)) s)"
}

# 1. The CUDA toolkit with Debian's stock module. cmake/Cuda.cmake looks for nvcc on PATH and in
# /usr/local/cuda/bin; without one there is no toolkit to find and nothing to check.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  rc=0
  stock=$("$root/tests/cmake/fetch_stock_find_cuda.sh") || rc=$?
  if [ "$rc" -eq 3 ]; then
    echo "$me: stock-module check skipped: this cmake is not Debian's"
  elif [ "$rc" -ne 0 ]; then
    echo "$me: could not get Debian's stock FindCUDAToolkit.cmake (above)" >&2
    exit 1
  else
    # A CMAKE_MODULE_PATH module takes precedence over CMake's own; the trace proves it ran.
    check stock-find-cuda "braid: CUDA enabled" \
      "$cmake" -S "$root" -B "$scratch/stock-find-cuda" -DBRAID_CUDA=AUTO \
      -DCMAKE_MODULE_PATH="$stock" --trace-source="$stock/FindCUDAToolkit.cmake" \
      --trace-redirect="$scratch/stock.trace"
    if ! grep -qF "$stock/FindCUDAToolkit.cmake(" "$scratch/stock.trace"; then
      echo "$me: stock-find-cuda: configured, but not with $stock/FindCUDAToolkit.cmake" >&2
      exit 1
    fi
  fi
else
  echo "$me: stock-module check skipped: no nvcc on this machine"
fi

# 2. No CUDA at all, BRAID_CUDA=AUTO: every folder holding an nvcc leaves PATH (all that
# check_language's sub-project searches, with CUDA_PATH) and is ignored by braid's own search,
# which also looks in /usr/local/cuda/bin and the system prefixes (the build machines have an
# nvcc wrapper in /usr/local/bin).
hidden=()
IFS=: read -r -a path_dirs <<<"$PATH"
candidates=("${path_dirs[@]}" ${CUDA_PATH:+"$CUDA_PATH/bin"} /usr/local/cuda/bin /usr/local/cuda-*/bin
            /opt/cuda/bin /usr/local/bin /usr/local/sbin /usr/bin /usr/sbin /bin /sbin)
for dir in "${candidates[@]}"; do
  [ -x "$dir/nvcc" ] && hidden+=("$dir")
done
stripped=()
for dir in "${path_dirs[@]}"; do
  [ -x "$dir/nvcc" ] || stripped+=("$dir")
done
hide_system=0
for dir in "${hidden[@]}"; do
  case $(realpath -m "$dir") in /usr/bin|/usr/sbin|/bin|/sbin) hide_system=1 ;; esac
done
if [ "$hide_system" -eq 1 ]; then
  # Debian's nvidia-cuda-toolkit puts nvcc in /usr/bin, which cannot be hidden from CMake.
  echo "$me: no-cuda check skipped: nvcc is in /usr/bin here"
else
  check no-cuda "braid: CUDA disabled; CPU-only build" \
    env -u CUDACXX -u CUDAHOSTCXX -u CUDA_PATH -u CUDAToolkit_ROOT \
      PATH="$(IFS=:; echo "${stripped[*]}")" \
      "$cmake" -S "$root" -B "$scratch/no-cuda" -DBRAID_CUDA=AUTO \
      -DCMAKE_IGNORE_PATH="$(IFS=';'; echo "${hidden[*]}")"
fi
