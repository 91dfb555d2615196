#!/usr/bin/env bash
# The test command: installs what is missing, builds braid (CUDA too when nvcc is found) and
# runs the whole suite with ctest. Idempotent; a rerun only rebuilds what changed.
#   tests/run.sh [extra ctest args]      env: BRAID_BUILD_DIR (default build/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BRAID_BUILD_DIR:-$root/build}

"$root/scripts/install_deps.sh" test
"$root/scripts/fetch_gpt2_vocab.sh"
# Configures scratch builds the way users' machines do (Debian's stock FindCUDAToolkit; no CUDA),
# which this machine's own configure below cannot show: seconds, first, so it fails fast.
"$root/tests/cmake/configure_check.sh"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"

# Two tests at a time on two cores; passive OpenMP waits so they do not spin against each other.
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export BRAID_DATA_DIR=${BRAID_DATA_DIR:-$root/data}
cd "$build"
ctest --output-on-failure -j"$(nproc)" "$@"
