#!/usr/bin/env bash
# CPU training throughput, braid vs PyTorch, same model/config/threads in one run, judged
# against the machine's measured two-thread sgemm ceiling; table on stdout, JSON in results/.
#
# Usage: benchmarks/cpu_vs_torch.sh [--torch-only] [--no-build] [--steps N] [--warmup N]
#                                   [--threads N] [--configs a,b]
# Env:   BRAID_BUILD_DIR (default build/), BRAID_JOBS (default 2), BRAID_BENCH_STEPS (10),
#        BRAID_BENCH_WARMUP (2), BRAID_BENCH_THREADS (2), TORCH_PYTHON (/usr/bin/python3).
# Configs: a = 12 layers, 12 heads, width 768, vocab 50257, B=4, T=64 (GPT-2 small)
#          b =  4 layers,  4 heads, width 256, vocab 50257, B=8, T=128
# MFU convention (docs): FLOPs/token = 6N + 6*L*T*C, N = all parameters with the padded vocab,
# the tied embedding counted once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BRAID_BUILD_DIR:-$ROOT/build}"
JOBS="${BRAID_JOBS:-2}"
STEPS="${BRAID_BENCH_STEPS:-10}"
WARMUP="${BRAID_BENCH_WARMUP:-2}"
THREADS="${BRAID_BENCH_THREADS:-2}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
COMMAND="benchmarks/cpu_vs_torch.sh${*:+ $*}"  # recorded in the JSON
TORCH_ONLY=0
BUILD=1
CONFIGS="a,b"

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "cpu_vs_torch.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --torch-only) TORCH_ONLY=1 ;;
    --no-build) BUILD=0 ;;
    --steps) STEPS="${2:?--steps needs a value}"; shift ;;
    --warmup) WARMUP="${2:?--warmup needs a value}"; shift ;;
    --threads) THREADS="${2:?--threads needs a value}"; shift ;;
    --configs) CONFIGS="${2:?--configs needs a value}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
  shift
done
for v in STEPS WARMUP THREADS; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "--${v,,} must be a non-negative integer, got '${!v}'"
done
[[ "$STEPS" -ge 1 && "$THREADS" -ge 1 ]] || die "--steps and --threads must be at least 1"

# name -> "layers heads width vocab batch seq"
declare -A CONFIG=(
  [a]="12 12 768 50257 4 64"
  [b]="4 4 256 50257 8 128"
)
IFS=',' read -r -a RUN_CONFIGS <<< "$CONFIGS"
for c in "${RUN_CONFIGS[@]}"; do [[ -n "${CONFIG[$c]:-}" ]] || die "unknown config '$c' (a or b)"; done

RESULTS_DIR="$ROOT/benchmarks/results"
RAW_DIR="$RESULTS_DIR/raw"
mkdir -p "$RAW_DIR"
rm -f "$RAW_DIR"/*.json

# The default interpreter gets Debian's python3-torch (and the build packages) when missing;
# a user-chosen TORCH_PYTHON is theirs to provide.
if [[ "$TORCH_PYTHON" == /usr/bin/python3 ]] && ! "$TORCH_PYTHON" -c "import torch" 2>/dev/null; then
  "$ROOT/scripts/install_deps.sh" bench
fi
"$TORCH_PYTHON" -c "import torch" 2>/dev/null ||
  die "$TORCH_PYTHON cannot import torch (Debian's python3-torch provides it; set TORCH_PYTHON)"

# ---- braid: build gpt_step_bench -----------------------------------------------------------
BENCH="$BUILD_DIR/benchmarks/gpt_step_bench"
if [[ "$TORCH_ONLY" == 0 ]]; then
  if [[ ! -f "$ROOT/benchmarks/gpt_step_bench.cpp" ]]; then
    die "gpt_step_bench is missing: benchmarks/gpt_step_bench.cpp does not exist yet, so braid" \
        "cannot be measured. Run with --torch-only to measure the PyTorch side alone."
  fi
  if [[ "$BUILD" == 1 ]]; then
    echo "== building gpt_step_bench (Release) in $BUILD_DIR with -j$JOBS"
    log="$RAW_DIR/build.log"
    # Benchmarks may be off in an existing build tree; this script needs them on.
    if ! { cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DBRAID_BUILD_BENCHMARKS=ON &&
           cmake --build "$BUILD_DIR" -j"$JOBS" --target gpt_step_bench; } > "$log" 2>&1; then
      tail -n 30 "$log" >&2
      die "building gpt_step_bench failed (full log: $log); --torch-only measures PyTorch alone"
    fi
  fi
  [[ -x "$BENCH" ]] || die "gpt_step_bench is missing: no executable at $BENCH" \
                           "(build it, or run with --torch-only)"
fi

# ---- the ceiling: the fastest of OpenBLAS's sgemm and oneDNN's sgemm and matmul, same threads ---
CEILING_BIN="$BUILD_DIR/sgemm_ceiling"
mkdir -p "$BUILD_DIR"
OPENBLAS_INC=/usr/include/x86_64-linux-gnu/openblas-openmp
OPENBLAS_LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
ceiling_libs=(-lopenblas)
if [[ -f /usr/include/oneapi/dnnl/dnnl.h ]]; then
  ceiling_libs+=(-DBRAID_CEILING_ONEDNN -ldnnl)
fi
cc -O2 -std=c11 -fopenmp "$ROOT/benchmarks/sgemm_ceiling.c" -I"$OPENBLAS_INC" -L"$OPENBLAS_LIB" \
  -Wl,-rpath,"$OPENBLAS_LIB" "${ceiling_libs[@]}" -o "$CEILING_BIN" ||
  die "cannot compile benchmarks/sgemm_ceiling.c against OpenBLAS (libopenblas-openmp-dev)" \
      "and oneDNN (libdnnl-dev)"
# Measured before and after the runs; the higher median counts, since other load on a shared
# machine only ever lowers it (one short measurement once read 69 against a usual 107-135).
measure_ceiling() {
  OMP_NUM_THREADS="$THREADS" "$CEILING_BIN" 1024 50 > "$RAW_DIR/sgemm_$1.txt"
  echo "sgemm ceiling ($1): $(grep -E '^(library|best|median)' "$RAW_DIR/sgemm_$1.txt" |
                              tr '\n' ' ')"
}
echo "== sgemm ceiling, $THREADS threads"
measure_ceiling before

# ---- the runs: braid then PyTorch on each config -------------------------------------------
for c in "${RUN_CONFIGS[@]}"; do
  read -r L H C V B T <<< "${CONFIG[$c]}"
  flags=(--layers "$L" --heads "$H" --width "$C" --vocab "$V" --batch "$B" --seq "$T"
         --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS")
  if [[ "$TORCH_ONLY" == 0 ]]; then
    echo "== config $c: braid"
    OMP_NUM_THREADS="$THREADS" "$BENCH" "${flags[@]}" --json "$RAW_DIR/${c}_braid.json"
  fi
  echo "== config $c: pytorch"
  # PASSIVE: idle OpenMP workers sleep instead of spinning against torch's intra-op threads.
  OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS="$THREADS" \
    "$TORCH_PYTHON" "$ROOT/benchmarks/reference/torch_gpt.py" "${flags[@]}" \
    --json "$RAW_DIR/${c}_pytorch.json"
done

measure_ceiling after
CEILING="$(awk '/^gflops /{print $2}' "$RAW_DIR/sgemm_before.txt" "$RAW_DIR/sgemm_after.txt" |
           sort -g | tail -n 1)"
CEILING_BEST="$(awk '/^best /{print $2}' "$RAW_DIR/sgemm_before.txt" "$RAW_DIR/sgemm_after.txt" |
                sort -g | tail -n 1)"
CEILING_LIBRARY="$(awk '/^library /{lib=$2} /^gflops /{print $2, lib}' \
                     "$RAW_DIR/sgemm_before.txt" "$RAW_DIR/sgemm_after.txt" |
                   sort -g | tail -n 1 | cut -d' ' -f2)"

# ---- table and JSON ------------------------------------------------------------------------
"$TORCH_PYTHON" - "$RAW_DIR" "$RESULTS_DIR/cpu_vs_torch.json" "$CEILING" "$CEILING_BEST" \
  "$THREADS" "$CONFIGS" "$CEILING_LIBRARY" "$COMMAND" <<'PY'
import json, os, platform, sys, time

raw, out, ceiling, ceiling_best, threads, configs, ceiling_library, command = sys.argv[1:9]
ceiling, ceiling_best = float(ceiling), float(ceiling_best)


def padded(v):
    return (v + 63) // 64 * 64


def n_params(cfg):
    # wte [Vp, C] (tied head, once) + wpe [T, C] + per block 12C^2 + 13C + ln_f 2C
    C, L = cfg["width"], cfg["layers"]
    return padded(cfg["vocab"]) * C + cfg["seq"] * C + L * (12 * C * C + 13 * C) + 2 * C


rows, summary = [], {}
for name in configs.split(","):
    entry = {}
    for impl in ("braid", "pytorch"):
        path = os.path.join(raw, f"{name}_{impl}.json")
        if not os.path.exists(path):
            continue
        r = json.load(open(path))
        cfg = r["config"]
        n = n_params(cfg)
        if r.get("params") not in (None, n):
            print(f"note: {impl} config {name} reports {r['params']} parameters, the "
                  f"convention counts {n}", file=sys.stderr)
        flops_per_token = 6 * n + 6 * cfg["layers"] * cfg["seq"] * cfg["width"]
        gflops = r["tokens_per_s"] * flops_per_token / 1e9
        r["flops_per_token"] = flops_per_token
        r["achieved_gflops"] = gflops
        r["pct_of_sgemm_ceiling"] = 100.0 * gflops / ceiling
        entry[impl] = r
        rows.append((name, impl, r["median_ms"], r["tokens_per_s"], gflops,
                     r["pct_of_sgemm_ceiling"]))
    if "braid" in entry and "pytorch" in entry:
        entry["ratio_tokens_per_s"] = entry["braid"]["tokens_per_s"] / entry["pytorch"]["tokens_per_s"]
    summary[name] = entry

print()
print(f"sgemm ceiling ({threads} threads, 1024^3, higher median of 50 before/after, "
      f"fastest GEMM: {ceiling_library}): {ceiling:.1f} GFLOP/s (best {ceiling_best:.1f})")
print(f"{'config':<7} {'impl':<8} {'median ms/step':>15} {'tokens/s':>10} {'GFLOP/s':>9} "
      f"{'% ceiling':>10}")
for name, impl, ms, tps, gf, pct in rows:
    print(f"{name:<7} {impl:<8} {ms:>15.1f} {tps:>10.1f} {gf:>9.1f} {pct:>9.1f}%")

result = {
    "benchmark": "cpu_vs_torch",
    "command": command,
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "host": platform.node(),
    "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                 if l.startswith("model name")), "unknown"),
    "threads": int(threads),
    "sgemm_ceiling_gflops": ceiling,
    "sgemm_best_gflops": ceiling_best,
    "sgemm_ceiling_def": "median of 50 1024^3 GEMMs at the same thread count with the fastest of "
                         "OpenBLAS's sgemm, oneDNN's sgemm and oneDNN's matmul primitive, the "
                         "higher of a measurement before and after the runs",
    "sgemm_ceiling_library": ceiling_library,
    "flops_convention": "FLOPs/token = 6N + 6*L*T*C, N = all params (padded vocab, tied "
                        "embedding once)",
    "configs": summary,
}
with open(out, "w") as f:
    json.dump(result, f, indent=1)
print(f"results: {out}")


def ratio(name):
    r = summary.get(name, {}).get("ratio_tokens_per_s")
    return "n/a" if r is None else f"{r:.2f}"


print(f"ratio braid/pytorch tokens/s: a={ratio('a')} b={ratio('b')}")
PY
