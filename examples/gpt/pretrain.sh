#!/usr/bin/env bash
# The main command: installs what is missing, builds braid, prepares the King James Bible as
# GPT-2 tokens, pretrains the tiny GPT on it and prints a generated sample.
# Trains data parallel on 2 ranks by default (mpirun); --ranks N changes that (1: no mpirun);
# --tp T splits the model over T of them (tensor parallel; dp = ranks / T), and
# --sequence-parallel also shards LayerNorm and residual activations along the sequence;
# --pp P pipelines the blocks over P of them (dp = ranks / (tp x pp)), with
# --virtual-stages V (interleaved 1F1B), --micro-batches M and --schedule NAME.
# --device cuda trains on the GPUs (training.device=cuda; rank r on cuda:<local rank>, so --ranks
# defaults to the number of GPUs nvidia-smi lists, or 1).
#   examples/gpt/pretrain.sh [--device cpu|cuda] [--ranks N] [--tp T] [--sequence-parallel] [--pp P]
#                            [--virtual-stages V] [--micro-batches M] [--schedule NAME]
#                            [--config FILE] [--steps N] [--set field=value ...] [--fresh]
# The configs checkpoint into out/ckpt/<name>/ and a rerun resumes from the newest checkpoint
# (in any layout: it is resharded); --fresh deletes them and starts over. Ctrl-C or SIGTERM
# stops every rank after its step with a checkpoint (exit 75); a second one stops at once.
# The run's metrics go to out/run/<config name>/ (training.run_dir, unless the config or a --set
# names one): metrics.jsonl, a TensorBoard event file, and at the end loss.png (tools/braid-plot).
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
ranks_given=0
device=cpu
tp=1
pp=1
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --config=*) config=${1#--config=}; shift ;;
    --ranks) ranks=$2; ranks_given=1; shift 2 ;;
    --ranks=*) ranks=${1#--ranks=}; ranks_given=1; shift ;;
    --device) device=$2; shift 2 ;;
    --device=*) device=${1#--device=}; shift ;;
    --tp) tp=$2; shift 2 ;;
    --tp=*) tp=${1#--tp=}; shift ;;
    --sequence-parallel) args+=(--set parallel.sequence_parallel=true); shift ;;
    --pp) pp=$2; shift 2 ;;
    --pp=*) pp=${1#--pp=}; shift ;;
    --virtual-stages) args+=(--set "parallel.virtual_stages=$2"); shift 2 ;;
    --micro-batches) args+=(--set "parallel.micro_batches=$2"); shift 2 ;;
    --schedule) args+=(--set "parallel.schedule=$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$device" in
  cpu) ;;
  cuda)
    args+=(--set training.device=cuda)
    if [ "$ranks_given" -eq 0 ]; then
      ranks=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
      [ "${ranks:-0}" -ge 1 ] || ranks=1
    fi ;;
  *) echo "pretrain.sh: --device needs cpu or cuda, got '$device'" >&2; exit 2 ;;
esac
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "pretrain.sh: --ranks needs a positive number, got '$ranks'" >&2; exit 2; }
[[ "$tp" =~ ^[1-9][0-9]*$ ]] || { echo "pretrain.sh: --tp needs a positive number, got '$tp'" >&2; exit 2; }
[[ "$pp" =~ ^[1-9][0-9]*$ ]] || { echo "pretrain.sh: --pp needs a positive number, got '$pp'" >&2; exit 2; }
# The run folder: a --set training.run_dir=... wins, then the config's own, then out/run/<name>.
run_dir=""
for arg in "${args[@]}"; do
  case "$arg" in training.run_dir=*) run_dir=${arg#training.run_dir=} ;; esac
done
if [ -z "$run_dir" ]; then
  run_dir=$(sed -n 's/^[[:space:]]*run_dir:[[:space:]]*"\([^"]*\)".*/\1/p' "$config" | tail -n 1)
fi
if [ -z "$run_dir" ]; then
  run_dir="out/run/$(basename "$config" .textproto)"
  args+=(--set "training.run_dir=$run_dir")
fi

# loss.png beside the metrics once the run ends (also a run stopped early by a signal).
# Debian's python3-matplotlib is for /usr/bin/python3, which a pyenv or venv python3 may hide.
plot_run() {
  local python=""
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import matplotlib" >/dev/null 2>&1; then
      python=$candidate
      break
    fi
  done
  if [ -z "$python" ]; then
    echo "pretrain.sh: matplotlib is missing, so no $run_dir/loss.png (scripts/install_deps.sh train installs python3-matplotlib)" >&2
  elif [ -f "$run_dir/metrics.jsonl" ]; then
    "$python" "$root/tools/braid-plot/braid-plot" "$run_dir" -o "$run_dir/loss.png" \
      --title "$(basename "$config" .textproto)" ||
      echo "pretrain.sh: braid-plot failed; the metrics are in $run_dir/metrics.jsonl" >&2
  fi
}

model_ranks=$((tp * pp))
if [ $((ranks % model_ranks)) -ne 0 ]; then
  echo "pretrain.sh: --tp $tp x --pp $pp = $model_ranks does not divide --ranks $ranks (ranks = tp x pp x dp); try --ranks $(( (ranks / model_ranks + 1) * model_ranks ))" >&2
  exit 2
fi

# OpenMP threads wait passively so the GEMM library and braid's loops do not spin against
# each other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$root"
layout=(--set parallel.tp="$tp" --set parallel.pp="$pp" --set parallel.dp=$((ranks / model_ranks)))
if [ "$ranks" -eq 1 ]; then
  # No mpirun: the binary itself takes the first signal (SIGTERM: its step, a checkpoint, exit
  # 75) and a second one (it ends at once), forwarded below.
  command=("$build/examples/pretrain_gpt")
  first_signal=TERM
else
  # One rank per core is the sweet spot; more ranks than cores still run (oversubscribed).
  # Ranks under mpirun draw no progress bar (they get a pty even when mpirun's output goes to a
  # file): ask for one only when this script writes to a terminal. A BRAID_PROGRESS already set
  # is passed on as it is.
  [ -t 1 ] && export BRAID_PROGRESS=${BRAID_PROGRESS:-1}
  launcher=(mpirun -np "$ranks" --bind-to none -x OMP_WAIT_POLICY)
  [ -n "${BRAID_PROGRESS:-}" ] && launcher+=(-x BRAID_PROGRESS)
  [ "$(id -u)" -eq 0 ] && launcher+=(--allow-run-as-root)
  [ "$ranks" -gt "$(nproc)" ] && launcher+=(--oversubscribe)
  # Ctrl-C or SIGTERM to this script becomes SIGUSR1 to mpirun, which passes it on to the ranks
  # (SIGTERM or SIGINT it would pass on and then kill them a second later): every rank finishes
  # its step, checkpoints and exits 75; a second signal ends the job at once.
  command=("${launcher[@]}" "$build/examples/pretrain_gpt")
  first_signal=USR1
fi
# The job runs in a session of its own, so the terminal's Ctrl-C reaches it only through here,
# once; this script stays to draw loss.png when it ends.
setsid "${command[@]}" --config "$config" "${layout[@]}" "${args[@]}" </dev/null &
job=$!
signals=0
forward() {
  signals=$((signals + 1))
  if [ "$signals" -eq 1 ]; then kill "-$first_signal" "$job" 2>/dev/null; else kill -TERM "$job" 2>/dev/null; fi
}
trap forward INT TERM
while :; do
  status=0
  wait "$job" || status=$?
  kill -0 "$job" 2>/dev/null || break  # a signal interrupted the wait: keep waiting
done
{ [ "$status" -eq 0 ] || [ "$status" -eq 75 ]; } && plot_run
exit "$status"
