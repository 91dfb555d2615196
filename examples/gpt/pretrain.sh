#!/usr/bin/env bash
# The main command: installs what is missing, builds braid, prepares the King James Bible as
# GPT-2 tokens, pretrains the tiny GPT on it and prints a generated sample.
#   examples/gpt/pretrain.sh [--config FILE] [--steps N] [--set field=value ...]
# env: BRAID_BUILD_DIR (default build/), BRAID_DATA_DIR (default data/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BRAID_BUILD_DIR:-$root/build}
export BRAID_DATA_DIR=${BRAID_DATA_DIR:-$root/data}

"$root/scripts/install_deps.sh" train
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target pretrain_gpt braid-tokenize
BRAID_BUILD_DIR="$build" "$root/examples/gpt/prepare_data.sh"

config="$root/examples/gpt/configs/tiny.textproto"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --config=*) config=${1#--config=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

# OpenMP threads wait passively so OpenBLAS and braid's loops do not spin against each other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$root"
exec "$build/examples/pretrain_gpt" --config "$config" "${args[@]}"
