#!/usr/bin/env bash
# Tensor parallelism on the small GPT (examples/gpt/configs/tiny.textproto's shape): step time
# and communication per step for tp=1 (one process, all cores) and tp=2 (one rank per half of
# the cores) with sequence parallelism off and on, in alternating rounds so machine drift hits
# all three alike. Writes benchmarks/results/tp_step.json and prints a summary.
#   benchmarks/tp_bench.sh [--rounds 2] [extra tp_step_bench flags, e.g. --steps 8]
#   env: BRAID_BUILD_DIR (default build/)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BRAID_BUILD_DIR:-$root/build}
bin=$build/benchmarks/tp_step_bench
rounds=2
command="benchmarks/tp_bench.sh${*:+ $*}"
if [ "${1:-}" = "--rounds" ]; then rounds=$2; shift 2; fi
if [[ ! -x "$bin" ]]; then
  echo "tp_bench.sh: $bin not built (cmake --build $build --target tp_step_bench)" >&2
  exit 1
fi
cores=$(nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # name ranks threads-per-rank flags...
  local name=$1 np=$2 threads=$3
  shift 3
  mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none \
    "$bin" --threads "$threads" --json "$out/$name.$round.json" "$@"
}
for round in $(seq 1 "$rounds"); do
  run tp1 1 "$cores" --tp 1 "$@"
  run tp2 2 $((cores / 2 > 0 ? cores / 2 : 1)) --tp 2 --sp 0 "$@"
  run tp2_sp 2 $((cores / 2 > 0 ? cores / 2 : 1)) --tp 2 --sp 1 "$@"
done
mkdir -p "$root/benchmarks/results"
python3 - "$out" "$root/benchmarks/results/tp_step.json" "$command" <<'PY'
import glob, json, os, statistics, sys
src, dst, command = sys.argv[1:4]
runs = {}
for path in sorted(glob.glob(os.path.join(src, "*.json"))):
    name = os.path.basename(path).split(".")[0]
    runs.setdefault(name, []).append(json.load(open(path)))
summary = {}
for name, rs in runs.items():
    summary[name] = {
        "tp": rs[0]["tp"], "sequence_parallel": rs[0]["sequence_parallel"],
        "threads_per_rank": rs[0]["threads_per_rank"],
        "step_ms_median": statistics.median(s for r in rs for s in r["step_ms"]),
        "bytes_measured": rs[0]["bytes_measured"], "bytes_analytic": rs[0]["bytes_analytic"],
        "wire_bytes_per_rank": rs[0]["wire_bytes_per_rank"], "ops": rs[0]["ops"], "rounds": len(rs)}
base = summary["tp1"]["step_ms_median"]
print(f"\n{'layout':<8} {'ranks x threads':>15} {'step ms':>9} {'vs tp=1':>8} "
      f"{'MiB/step':>9} {'analytic':>9} {'wire MiB/rank':>14}")
for name in ("tp1", "tp2", "tp2_sp"):
    s = summary[name]
    print(f"{name:<8} {str(s['tp']) + ' x ' + str(s['threads_per_rank']):>15} "
          f"{s['step_ms_median']:9.1f} {s['step_ms_median'] / base:8.2f} "
          f"{s['bytes_measured'] / 2**20:9.3f} {s['bytes_analytic'] / 2**20:9.3f} "
          f"{s['wire_bytes_per_rank'] / 2**20:14.3f}")
# The run's facts from tp=1's first run (tp_step_bench writes them), with this script's command.
first = runs["tp1"][0]
result = {"benchmark": "tp_step", "command": command, "date": first["date"],
          "host": first["host"], "cpu": first["cpu"], "threads": first["threads"],
          "layouts": summary}
json.dump(result, open(dst, "w"), indent=2)
print(f"\nwrote {dst}")
PY
