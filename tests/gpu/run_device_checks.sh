#!/usr/bin/env bash
# The one script a GPU machine runs: builds braid with CUDA, runs the GPU test binary and the
# micro benchmarks, prints a summary table and leaves every log under ${OUT:-./gpu-out}.
#
#   tests/gpu/run_device_checks.sh
#
# Environment (all optional):
#   OUT                    where logs go (default ./gpu-out)
#   BRAID_DEPS_PREFIX      a folder where Debian packages were unpacked with `dpkg -x`; its
#                          usr/include, usr/lib and pkg-config files are put on the search paths
#   BRAID_BUILD_DIR        build folder (default build-gpu)
#   BRAID_CUDA_ARCHS       CMAKE_CUDA_ARCHITECTURES (default 90: Hopper)
#   BRAID_JOBS             parallel build jobs (default: all cores)
#   BRAID_SKIP_BENCH=1     skip the micro benchmarks
#   BRAID_CPU_GEMM         onednn or openblas (default: onednn when oneapi/dnnl/dnnl.h is in
#                          /usr/include or the deps prefix, i.e. libdnnl-dev, libdnnl2 and
#                          ocl-icd-libopencl1 were unpacked; else openblas)
#   BRAID_TIMEOUT_CONFIGURE, _BUILD, _TEST, _BENCH   per-phase limits in seconds
#
# Each phase runs under `timeout`, appends to a log in $OUT and is recorded in the summary; a
# phase whose prerequisite failed is reported as skipped. $OUT receives at most 8 files
# (environment, configure, build, test and bench logs, the gtest XML, the benchmark JSON, the
# summary), which is what the device machine hands back. Exit status: 0 when every phase that
# ran passed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-./gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/{environment,configure,build,test,bench}.log "$out"/summary.txt
build=${BRAID_BUILD_DIR:-$root/build-gpu}
archs=${BRAID_CUDA_ARCHS:-90}
jobs=${BRAID_JOBS:-$(nproc)}
t_configure=${BRAID_TIMEOUT_CONFIGURE:-300}
t_build=${BRAID_TIMEOUT_BUILD:-900}
t_test=${BRAID_TIMEOUT_TEST:-300}
t_bench=${BRAID_TIMEOUT_BENCH:-300}

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
  -DCMAKE_CUDA_ARCHITECTURES="$archs" -DBRAID_BUILD_TESTS=ON -DBRAID_BUILD_EXAMPLES=OFF
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

targets=(braid_test_gpu)
[ "$bench_flag" = ON ] && [ -d "$root/benchmarks/micro" ] && targets+=(braid_micro_bench)
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
