#!/usr/bin/env bash
# The main command: installs what is missing, builds braid, prepares the King James Bible as
# GPT-2 tokens, pretrains the tiny GPT on it and prints a generated sample.
# Trains data parallel on 2 ranks by default (mpirun); --ranks N changes that (1: no mpirun).
#   examples/gpt/pretrain.sh [--ranks N] [--config FILE] [--steps N] [--set field=value ...]
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
ranks=2
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --config=*) config=${1#--config=}; shift ;;
    --ranks) ranks=$2; shift 2 ;;
    --ranks=*) ranks=${1#--ranks=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "pretrain.sh: --ranks needs a positive number, got '$ranks'" >&2; exit 2; }

# OpenMP threads wait passively so OpenBLAS and braid's loops do not spin against each other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$root"
if [ "$ranks" -eq 1 ]; then
  exec "$build/examples/pretrain_gpt" --config "$config" "${args[@]}"
fi
# One rank per core is the sweet spot; more ranks than cores still run (oversubscribed).
# Ranks get a pty from mpirun even when this script's output goes to a file: tell them.
[ -t 1 ] || export BRAID_PROGRESS=0
launcher=(mpirun -np "$ranks" --bind-to none -x OMP_WAIT_POLICY)
[ -n "${BRAID_PROGRESS:-}" ] && launcher+=(-x BRAID_PROGRESS)
[ "$(id -u)" -eq 0 ] && launcher+=(--allow-run-as-root)
[ "$ranks" -gt "$(nproc)" ] && launcher+=(--oversubscribe)
exec "${launcher[@]}" "$build/examples/pretrain_gpt" --config "$config" \
  --set parallel.dp="$ranks" "${args[@]}"
