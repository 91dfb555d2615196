#!/usr/bin/env bash
# Runs the collective bandwidth benchmark with 2 and 4 ranks and writes
# benchmarks/results/collectives_np{2,4}.json next to the printed tables.
#   benchmarks/collectives/run.sh [extra collective_bench args]
#   env: BRAID_BUILD_DIR (default build/), NPS (default "2 4"), COLLECTIVE_BENCH (the binary)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BRAID_BUILD_DIR:-$root/build}
bin=${COLLECTIVE_BENCH:-$build/benchmarks/collectives/collective_bench}
if [[ ! -x "$bin" ]]; then
  echo "run.sh: $bin not built (cmake --build $build --target collective_bench)" >&2
  exit 1
fi
mkdir -p "$root/benchmarks/results"
# The command the JSON records (bench_support's run_facts), as it was typed here.
export BRAID_BENCH_COMMAND="${NPS:+NPS=\"$NPS\" }benchmarks/collectives/run.sh${*:+ $*}"
for np in ${NPS:-2 4}; do
  # One OpenMP thread per rank: the benchmark measures communication, not compute.
  mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 \
    "$bin" --json "$root/benchmarks/results/collectives_np$np.json" "$@"
done
