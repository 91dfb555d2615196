#!/usr/bin/env bash
# The one script a GPU machine runs: builds braid with CUDA, runs the GPU test binary and the
# micro benchmarks, trains on the device against the CPU and against PyTorch, measures the
# checkpoint stall there, prints a summary table and leaves every log under ${OUT:-./gpu-out}.
#
#   tests/gpu/run_device_checks.sh
#
# Training phases (each skipped when its binary or data is missing):
#   train-cpu, train-cuda  the tiny config (examples/gpt/configs/tiny.textproto) for 50 steps
#                          on the KJV shards of data/kjv (examples/gpt/prepare_data.sh makes
#                          them; carry data/ to the device machine), once per device
#   compare-losses         tests/gpu/compare_losses.py: every step within 1e-4 relative
#   step-vs-torch          GPT-2 124M (T=1024, B=4) fp32 step time: gpt_step_bench --device cuda
#                          and benchmarks/reference/torch_gpt.py --device cuda (TF32 off in
#                          both), and their ratio
#   checkpoint-stall       benchmarks/checkpoint_stall --device cuda --models gpt2 --every 10
#                          over sync, async and overlapped
#
# Environment (all optional):
#   OUT                    where logs go (default ./gpu-out)
#   BRAID_DEPS_PREFIX      a folder where Debian packages were unpacked with `dpkg -x`; its
#                          usr/include, usr/lib and pkg-config files are put on the search paths
#   BRAID_BUILD_DIR        build folder (default build-gpu)
#   BRAID_CUDA_ARCHS       CMAKE_CUDA_ARCHITECTURES (default 90: Hopper)
#   BRAID_JOBS             parallel build jobs (default: all cores)
#   BRAID_SKIP_BENCH=1     skip the micro benchmarks
#   BRAID_SKIP_TRAIN=1     skip the training phases
#   TORCH_PYTHON           the interpreter with PyTorch 2.x and CUDA (default python3)
#   BRAID_CPU_GEMM         onednn or openblas (default: onednn when oneapi/dnnl/dnnl.h is in
#                          /usr/include or the deps prefix, i.e. libdnnl-dev, libdnnl2 and
#                          ocl-icd-libopencl1 were unpacked; else openblas)
#   BRAID_TIMEOUT_CONFIGURE, _BUILD, _TEST, _BENCH, _TRAIN   per-phase limits in seconds
#
# Each phase runs under `timeout`, appends to a log in $OUT and is recorded in the summary; a
# phase whose prerequisite failed is reported as skipped. $OUT receives at most 8 files
# (environment, configure, build, test and bench logs, the gtest XML, the benchmark JSON, the
# summary, and the JSON of the training phases), which is what the device machine hands back.
# Exit status: 0 when every phase that ran passed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-./gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/{environment,configure,build,test,bench,train}.log "$out"/summary.txt
build=${BRAID_BUILD_DIR:-$root/build-gpu}
archs=${BRAID_CUDA_ARCHS:-90}
jobs=${BRAID_JOBS:-$(nproc)}
t_configure=${BRAID_TIMEOUT_CONFIGURE:-300}
t_build=${BRAID_TIMEOUT_BUILD:-900}
t_test=${BRAID_TIMEOUT_TEST:-300}
t_bench=${BRAID_TIMEOUT_BENCH:-300}
t_train=${BRAID_TIMEOUT_TRAIN:-240}
torch_python=${TORCH_PYTHON:-python3}

summary=()  # "phase|status|seconds|log"
failed=0

# run_phase NAME LOG LIMIT CMD...: runs CMD under a timeout, appending to $out/LOG.
run_phase() {
  local name=$1 log="$out/$2" limit=$3
  shift 3
  local start status rc
  start=$(date +%s)
  echo "== $name (limit ${limit}s)"
  {
    echo "# $(date -u +%FT%TZ) $name: $*"
    echo
  } >>"$log"
  timeout --kill-after=15 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  case $rc in
    0) status=ok ;;
    124 | 137) status="timeout (${limit}s)" ;;
    *) status="failed (rc $rc)" ;;
  esac
  summary+=("$name|$status|$(($(date +%s) - start))|$log")
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "   $status; last lines of $log:"
    tail -n 25 "$log" | sed 's/^/   | /'
  fi
  return "$rc"
}

skip_phase() {
  summary+=("$1|skipped ($2)|0|-")
  echo "== $1 skipped: $2"
}

# ---- environment ------------------------------------------------------------------------------
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
if [ -n "${BRAID_DEPS_PREFIX:-}" ]; then
  deps=$(cd "$BRAID_DEPS_PREFIX" && pwd)
  arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
  libdirs="$deps/usr/lib/$arch:$deps/usr/lib:$deps/lib/$arch"
  # Debian keeps some libraries (OpenBLAS variants) in subfolders selected by alternatives,
  # which `dpkg -x` does not set up: add every folder that holds a shared library.
  while IFS= read -r dir; do libdirs="$libdirs:$dir"; done < <(
    find "$deps/usr/lib" -name '*.so*' -printf '%h\n' 2>/dev/null | sort -u)
  # Unpacked .pc files still say prefix=/usr: rewrite copies to point into the deps folder.
  pcdir="$build/deps-pkgconfig"
  mkdir -p "$pcdir"
  find "$deps" -name '*.pc' -path '*pkgconfig*' 2>/dev/null | while IFS= read -r pc; do
    sed -e "s#^prefix=/usr#prefix=$deps/usr#" -e "s#=/usr/#=$deps/usr/#g" "$pc" \
      >"$pcdir/$(basename "$pc")"
  done
  export CMAKE_PREFIX_PATH="$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$deps/usr/include:$deps/usr/include/$arch${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$libdirs${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export PATH="$deps/usr/bin:$PATH"
  echo "deps prefix: $deps"
fi
{
  echo "root: $root"
  echo "build: $build (CUDA archs $archs, $jobs jobs)"
  echo "CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:-}"
  echo "PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-}"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  command -v nvcc && nvcc --version | tail -n 2
  command -v cmake && cmake --version | head -n 1
} >"$out/environment.log" 2>&1

# ---- phases -----------------------------------------------------------------------------------
run_phase device environment.log 60 nvidia-smi

bench_flag=ON
[ "${BRAID_SKIP_BENCH:-0}" = 1 ] && bench_flag=OFF
# The CPU GEMM library: oneDNN where its header is (system or deps prefix), else OpenBLAS, so a
# prefix unpacked without the oneDNN packages still builds.
cpu_gemm=${BRAID_CPU_GEMM:-}
if [ -z "$cpu_gemm" ]; then
  cpu_gemm=openblas
  for inc in /usr/include "${deps:-/nonexistent}/usr/include"; do
    [ -f "$inc/oneapi/dnnl/dnnl.h" ] && cpu_gemm=onednn
  done
fi
echo "CPU GEMM: $cpu_gemm"
cmake_args=(-S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRAID_CUDA=ON
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DBRAID_BUILD_TESTS=ON -DBRAID_BUILD_EXAMPLES=ON
  -DBRAID_CPU_GEMM="$cpu_gemm")
configured=0
if run_phase configure configure.log "$t_configure" cmake "${cmake_args[@]}" -DBRAID_BUILD_BENCHMARKS="$bench_flag"; then
  configured=1
elif [ "$bench_flag" = ON ]; then
  # Most likely Google Benchmark is missing: the tests matter more, so retry without it.
  bench_flag=OFF
  run_phase configure-no-bench configure.log "$t_configure" cmake "${cmake_args[@]}" \
    -DBRAID_BUILD_BENCHMARKS=OFF && configured=1
fi

targets=(braid_test_gpu pretrain_gpt)
[ "$bench_flag" = ON ] && [ -d "$root/benchmarks/micro" ] && targets+=(braid_micro_bench)
[ "$bench_flag" = ON ] && targets+=(gpt_step_bench checkpoint_stall)
built=0
if [ "$configured" = 1 ]; then
  run_phase build build.log "$t_build" cmake --build "$build" -j "$jobs" --target "${targets[@]}" && built=1
else
  skip_phase build "configure failed"
fi

# Only binaries from this run's build: a stale one from an earlier build would mislead.
test_bin="$build/tests/braid_test_gpu"
if [ "$built" = 1 ] && [ -x "$test_bin" ]; then
  run_phase test test.log "$t_test" "$test_bin" --gtest_output="xml:$out/braid_test_gpu.xml"
else
  skip_phase test "not built"
fi

bench_bin="$build/benchmarks/braid_micro_bench"
if [ "$bench_flag" = OFF ] || [ "$built" = 0 ]; then
  skip_phase bench "benchmarks not built"
elif [ -x "$bench_bin" ]; then
  run_phase bench bench.log "$t_bench" "$bench_bin" --benchmark_min_time=0.05 \
    --benchmark_out="$out/micro_bench.json" --benchmark_out_format=json
else
  skip_phase bench "no benchmark binary"
fi

# ---- training on the device --------------------------------------------------------------------
runs="$build/device-runs"
pretrain="$build/examples/pretrain_gpt"
if [ "${BRAID_SKIP_TRAIN:-0}" = 1 ]; then
  skip_phase training "BRAID_SKIP_TRAIN=1"
elif [ "$built" = 0 ] || [ ! -x "$pretrain" ]; then
  skip_phase training "pretrain_gpt not built"
elif ! ls "$root"/data/kjv/kjv_train_*.bin >/dev/null 2>&1; then
  skip_phase training "no data/kjv shards (run examples/gpt/prepare_data.sh and carry data/)"
else
  rm -rf "$runs"
  mkdir -p "$runs"
  # Same config, data and seed on both devices; no checkpoints, validation or samples.
  tiny=(--config "$root/examples/gpt/configs/tiny.textproto" --steps 50
    --set training.log_every=1 --set training.val_every=0 --set sample.tokens=0
    --set checkpoint.dir="" --set checkpoint.every_steps=0 --set resume="")
  cd "$root"  # the config's data paths are relative to the repository
  for device in cpu cuda; do
    # The device run also traces steps 10-11 into $out/cuda_run/trace.json (host spans and the
    # device's kernel track; a traced step trains bitwise like an untraced one).
    traced=()
    [ "$device" = cuda ] &&
      traced=(--set training.trace_steps=10:11 --set training.run_dir="$out/cuda_run")
    # The run's own log, for the comparison, and a copy in train.log.
    run_phase "train-$device" train.log "$t_train" bash -o pipefail -c \
      'log=$1; shift; "$@" 2>&1 | tee "$log"' _ "$runs/$device.log" "$pretrain" "${tiny[@]}" \
      --set training.device=$device "${traced[@]}"
  done
  run_phase compare-losses train.log 30 python3 "$root/tests/gpu/compare_losses.py" \
    "$runs/cpu.log" "$runs/cuda.log" --rtol 1e-4
fi

step_bench="$build/benchmarks/gpt_step_bench"
gpt2=(--layers 12 --heads 12 --width 768 --vocab 50257 --batch 4 --seq 1024 --steps 10 --warmup 3)
if [ "${BRAID_SKIP_TRAIN:-0}" = 1 ] || [ ! -x "$step_bench" ] || [ "$built" = 0 ]; then
  skip_phase step-vs-torch "gpt_step_bench not built or training skipped"
else
  run_phase step-braid train.log "$t_train" "$step_bench" "${gpt2[@]}" --device cuda \
    --json "$out/step_braid_cuda.json"
  run_phase step-torch train.log "$t_train" "$torch_python" \
    "$root/benchmarks/reference/torch_gpt.py" "${gpt2[@]}" --device cuda \
    --json "$out/step_torch_cuda.json"
  if [ -f "$out/step_braid_cuda.json" ] && [ -f "$out/step_torch_cuda.json" ]; then
    python3 - "$out/step_braid_cuda.json" "$out/step_torch_cuda.json" <<'PY' | tee -a "$out/train.log"
import json, sys
braid, torch = (json.load(open(p)) for p in sys.argv[1:3])
print(f"GPT-2 124M fp32 step (B=4, T=1024): braid {braid['median_ms']:.1f} ms, "
      f"PyTorch {torch['median_ms']:.1f} ms ({torch['torch_version']}, {torch['attention']}, "
      f"AdamW {torch['adamw']}): PyTorch / braid = {torch['median_ms'] / braid['median_ms']:.2f}")
PY
  fi
fi

stall_bench="$build/benchmarks/checkpoint_stall"
if [ "${BRAID_SKIP_TRAIN:-0}" = 1 ] || [ ! -x "$stall_bench" ] || [ "$built" = 0 ]; then
  skip_phase checkpoint-stall "checkpoint_stall not built or training skipped"
else
  run_phase checkpoint-stall train.log "$t_train" "$stall_bench" --device cuda --models gpt2 \
    --every 10 --modes sync,async,overlapped --steps-gpt2 30 --pairs 2 \
    --json "$out/checkpoint_stall_cuda.json"
fi

# ---- summary ----------------------------------------------------------------------------------
{
  echo
  printf '%-20s %-22s %8s  %s\n' phase status seconds log
  printf '%-20s %-22s %8s  %s\n' -------------------- ---------------------- -------- ---
  for row in "${summary[@]}"; do
    IFS='|' read -r name status secs log <<<"$row"
    printf '%-20s %-22s %8s  %s\n' "$name" "$status" "$secs" "$log"
  done
  if [ -f "$out/test.log" ]; then
    echo
    echo "gtest: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/test.log" |
      tr -s ' ' | paste -sd ' ' -)"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$out/test.log" | sort -u
  fi
} | tee "$out/summary.txt"
exit "$failed"
