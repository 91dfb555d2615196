#!/usr/bin/env bash
# The pipeline/tensor/data-parallel equivalence matrix over more steps than CI runs:
# every layout of tests/dist/test_pipeline_training.cpp on 2, 3, 4 and 8 ranks.
#   tests/dist/long_equivalence.sh [steps (default 100)]
#   env: BRAID_BUILD_DIR (default build/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BRAID_BUILD_DIR:-$root/build}
bin=$build/tests/dist/braid_test_parallel
[[ -x "$bin" ]] || { echo "long_equivalence.sh: build $bin first (tests/run.sh)" >&2; exit 1; }
export BRAID_EQUIVALENCE_STEPS=${1:-100}
for np in 2 3 4 8; do
  echo "== $np ranks, $BRAID_EQUIVALENCE_STEPS steps"
  mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 \
    -x BRAID_EQUIVALENCE_STEPS -x BRAID_COLLECTIVE_TIMEOUT_S=300 \
    "$bin" --gtest_filter='PipelineTraining.EquivalenceMatrix*:PipelineTraining.MoreSchedules*'
done
