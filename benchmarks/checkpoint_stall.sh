#!/usr/bin/env bash
# Checkpoint stall: for the small GPT and GPT-2 124M's shape, every 10 and 50 steps, sync and
# async side by side in one process: the time save_checkpoint() stops training, ordinary and
# after-checkpoint step times, bytes and extra host memory per checkpoint, and the total
# overhead. Writes benchmarks/results/checkpoint_stall.json and prints a table.
#   benchmarks/checkpoint_stall.sh [checkpoint_stall flags, e.g. --models small
#                                   --modes sync,async,overlapped --every 10 --steps-small 25]
#   env: BRAID_BUILD_DIR (default build/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BRAID_BUILD_DIR:-$root/build}
bin=$build/benchmarks/checkpoint_stall
if [[ ! -x "$bin" ]]; then
  echo "checkpoint_stall.sh: $bin not built (cmake --build $build --target checkpoint_stall)" >&2
  exit 1
fi
# Idle OpenMP workers sleep instead of spinning, so an asynchronous writer thread gets a core
# when compute pauses rather than competing with busy-waiting threads.
export OMP_WAIT_POLICY=PASSIVE
# The command the JSON records (bench_support's run_facts), as it was typed here.
export BRAID_BENCH_COMMAND="benchmarks/checkpoint_stall.sh${*:+ $*}"
# The default result path is the repository's, from any folder; a later --json wins.
exec "$bin" --json "$root/benchmarks/results/checkpoint_stall.json" "$@"
