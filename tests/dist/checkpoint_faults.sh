#!/usr/bin/env bash
# Checkpoint fault trials: each trial trains with checkpoints under a random layout (1, 2 or 4
# ranks; data, tensor and pipeline parallel, tp2 x dp2 and pp2 x dp2 among them) and is killed
# (SIGKILL, one rank or all) at a random point of the protocol, including the deletion of an old
# checkpoint and the load of a resuming run, or hits an injected full disk, or gets a SIGTERM on
# every rank as Slurm sends before a time limit. With data parallelism the optimizer state is
# replicated or, at random, sharded (zero1: every rank writes its chunks).
# Afterwards every folder that looks committed must pass `braid-ckpt verify`, and the newest must
# load (resharded into another random layout) and resume; no partial one may ever load. After a
# SIGTERM the run must have exited 75 with the checkpoint of the step it stopped at.
#   tests/dist/checkpoint_faults.sh BUILD_DIR [trials (default 50)] [seed (default 1)] [device]
# CI runs 50 trials; `tests/dist/checkpoint_faults.sh build 200` is the long version. With device
# `cuda` each trial, at random, either trains one rank on the SIMT emulator's device
# (braid_simt_fault_checkpoint: the state, and every checkpoint copy, on the device) and verifies
# the checkpoint on the CPU, resharded into a random layout, or trains on the CPU in a random
# layout and verifies on the emulated device.
set -uo pipefail
build=$1
trials=${2:-50}
RANDOM=${3:-1}
device=${4:-cpu}
cpu_bin=$build/tests/dist/braid_fault_checkpoint
device_bin=$cpu_bin
if [ "$device" = cuda ]; then
  device_bin=$build/tests/simt/braid_simt_fault_checkpoint
  export ASAN_OPTIONS=detect_leaks=0  # Open MPI keeps allocations alive past exit
elif [ "$device" != cpu ]; then
  echo "device must be cpu or cuda, got $device"
  exit 2
fi
bin=$cpu_bin  # what launch runs
ckpt_tool=$build/tools/braid-ckpt/braid-ckpt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
points=(window replay mid_file before_commit latest retention load enospc sigterm)
modes=(sync async overlapped)
# "ranks tp pp": dp = ranks / (tp x pp)
layouts=("1 1 1" "2 1 1" "2 2 1" "2 1 2" "4 2 2" "4 1 2" "4 2 1")
# shellcheck source=launch.sh
source "$(dirname "${BASH_SOURCE[0]}")/launch.sh"
failures=0
run() {  # ranks, then the program's arguments, in the foreground
  launch "$@"
  wait "$launched"
}
fail() {
  echo "$*"
  failures=$((failures + 1))
}
for trial in $(seq 1 "$trials"); do
  point=${points[$((RANDOM % ${#points[@]}))]}
  mode=${modes[$((RANDOM % ${#modes[@]}))]}
  [[ $point == window || $point == replay ]] && mode=overlapped
  read -r np tp pp <<<"${layouts[$((RANDOM % ${#layouts[@]}))]}"
  [ "$point" = enospc ] && read -r np tp pp <<<"1 1 1"
  read -r vnp vtp vpp <<<"${layouts[$((RANDOM % ${#layouts[@]}))]}"
  # Where the job trains and where its checkpoint is verified (the Trainer on a device: one rank).
  train_on=cpu verify_on=cpu
  if [ "$device" = cuda ]; then
    if [ $((RANDOM % 2)) -eq 0 ]; then
      train_on=cuda
      read -r np tp pp <<<"1 1 1"
    else
      verify_on=cuda
      read -r vnp vtp vpp <<<"1 1 1"
    fi
  fi
  train_bin=$cpu_bin verify_bin=$cpu_bin
  [ "$train_on" = cuda ] && train_bin=$device_bin
  [ "$verify_on" = cuda ] && verify_bin=$device_bin
  step=$(((RANDOM % 3 + 1) * 2))  # checkpoints are requested at steps 2, 4, 6
  # An overlapped window opened at step s lands (and is written) at s + 2 (window 3).
  [ "$mode" = overlapped ] && step=$((step + 2))
  keep=3
  # Keeping one, each commit deletes the one before: sync and async checkpoints 2, 4, 6 and
  # overlapped ones 4, 6 are deleted; the fault names the step being deleted.
  if [ "$point" = retention ]; then
    keep=1
    step=$(((RANDOM % 3) * 2 + 2))
    [ "$mode" = overlapped ] && step=$(((RANDOM % 2) * 2 + 4))
  fi
  [ "$point" = load ] && step=8  # the newest checkpoint, which the resuming run loads
  strategy=auto
  [ $((np / (tp * pp))) -gt 1 ] && [ $((RANDOM % 2)) -eq 1 ] && strategy=zero1
  target=$((RANDOM % (np + 1) - 1))  # -1: every rank
  ckpt=$work/ckpt_$trial
  fault="$point:$step"
  [ "$target" -ge 0 ] && fault="$fault:$target"
  args=(--dir "$ckpt" --data "$work/data" --mode "$mode" --tp "$tp" --pp "$pp"
        --strategy "$strategy" --keep "$keep" --device "$train_on")
  bin=$train_bin
  log=$work/trial_$trial.log
  case $point in
    load)  # a finished run, then a resuming one killed while it loads
      BRAID_CKPT_FAULT= run "$np" "${args[@]}" >"$log" 2>&1
      BRAID_CKPT_FAULT=$fault BRAID_COLLECTIVE_TIMEOUT_S=10 run "$np" "${args[@]}" --steps 10 \
        >>"$log" 2>&1
      status=$?
      ;;
    sigterm)  # SIGTERM on every rank once the first checkpoint is committed
      fault="sigterm"
      BRAID_CKPT_FAULT= BRAID_COLLECTIVE_TIMEOUT_S=10 launch "$np" "${args[@]}" --steps 400 \
        >"$log" 2>&1
      wait_for "$ckpt/latest" "$launched"
      terminate_ranks "$np" "$launched"
      wait "$launched"
      status=$?
      stopped=$(grep -o "stopped after [0-9]*" "$log" | grep -o "[0-9]*$")
      if [ "$status" -ne 75 ] || [ -z "$stopped" ]; then
        fail "trial $trial (SIGTERM, $mode, $np ranks tp=$tp pp=$pp $strategy): exit $status," \
             "not 75 with a checkpoint:"
        tail -5 "$log"
        continue
      fi
      ;;
    *)
      BRAID_CKPT_FAULT=$fault BRAID_COLLECTIVE_TIMEOUT_S=10 run "$np" "${args[@]}" >"$log" 2>&1
      status=$?
      ;;
  esac
  if [ "$point" = enospc ] && ! grep -q "No space left on device" "$log"; then
    fail "trial $trial ($fault, $mode): the full disk was not reported: $(cat "$log")"
    continue
  fi
  # Nothing that looks committed may be damaged (a deletion cut short must have uncommitted it).
  damaged=0
  for folder in "$ckpt"/step_*; do
    [ -e "$folder/manifest.pb" ] || continue
    if ! out=$("$ckpt_tool" verify "$folder" 2>&1); then
      fail "trial $trial ($fault, $mode, $np ranks tp=$tp pp=$pp $strategy, exit $status):" \
           "$folder looks committed but fails verify:"
      echo "$out" | tail -3
      damaged=1
    fi
  done
  [ "$damaged" -eq 1 ] && continue
  bin=$verify_bin  # a device's checkpoint loads on the CPU, and the reverse
  verify=$(BRAID_COLLECTIVE_TIMEOUT_S=10 run "$vnp" --dir "$ckpt" --data "$work/data" \
           --mode "$mode" --tp "$vtp" --pp "$vpp" --device "$verify_on" --verify 2>&1)
  if [ $? -ne 0 ] || ! grep -q "verified: resumed at step" <<<"$verify"; then
    fail "trial $trial ($fault, $mode, $np ranks tp=$tp pp=$pp $strategy, exit $status;" \
         "verified as $vnp ranks tp=$vtp pp=$vpp): the last checkpoint did not load:"
    echo "$verify" | tail -5
    continue
  fi
  resumed=$(grep -o "resumed at step [0-9]*" <<<"$verify")
  if [ "$point" = sigterm ] && [ "$resumed" != "resumed at step $stopped" ]; then
    fail "trial $trial (SIGTERM, $mode): stopped after step $stopped but $resumed"
    continue
  fi
  echo "trial $trial: $fault $mode on $np rank(s) tp=$tp pp=$pp $strategy $train_on, exit" \
       "$status -> $resumed as $vnp rank(s) tp=$vtp pp=$vpp $verify_on"
done
echo "$((trials - failures)) of $trials trials recovered"
[ "$failures" -eq 0 ]
