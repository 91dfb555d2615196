#!/usr/bin/env bash
# Checkpoint fault trials: each trial trains with checkpoints under a random layout (1, 2 or 4
# ranks; data, tensor and pipeline parallel) and is killed (SIGKILL, one rank or all) at a
# random point of the protocol, or hits an injected full disk. With data parallelism the
# optimizer state is replicated or, at random, sharded (zero1: every rank writes its chunks).
# Afterwards the newest committed checkpoint must load (resharded into another random
# layout), verify its checksums and resume, and no partial one may ever load.
#   tests/dist/checkpoint_faults.sh BUILD_DIR [trials (default 50)] [seed (default 1)]
# CI runs 50 trials; `tests/dist/checkpoint_faults.sh build 200` is the long version.
set -uo pipefail
build=$1
trials=${2:-50}
RANDOM=${3:-1}
bin=$build/tests/dist/braid_fault_checkpoint
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
points=(window replay mid_file before_commit latest enospc)
modes=(sync async overlapped)
# "ranks tp pp": dp = ranks / (tp x pp)
layouts=("1 1 1" "2 1 1" "2 2 1" "2 1 2" "4 2 2" "4 1 2" "4 2 1")
failures=0
run() {  # ranks, then the program's arguments
  local np=$1
  shift
  if [ "$np" -eq 1 ]; then
    "$bin" "$@"
  else
    mpirun -np "$np" --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 \
      -x BRAID_CKPT_FAULT -x BRAID_COLLECTIVE_TIMEOUT_S "$bin" "$@"
  fi
}
for trial in $(seq 1 "$trials"); do
  point=${points[$((RANDOM % ${#points[@]}))]}
  mode=${modes[$((RANDOM % ${#modes[@]}))]}
  [[ $point == window || $point == replay ]] && mode=overlapped
  read -r np tp pp <<<"${layouts[$((RANDOM % ${#layouts[@]}))]}"
  [ "$point" = enospc ] && read -r np tp pp <<<"1 1 1"
  read -r vnp vtp vpp <<<"${layouts[$((RANDOM % ${#layouts[@]}))]}"
  step=$(((RANDOM % 3 + 1) * 2))  # checkpoints are requested at steps 2, 4, 6
  # An overlapped window opened at step s lands (and is written) at s + 2 (window 3).
  [ "$mode" = overlapped ] && step=$((step + 2))
  strategy=auto
  [ $((np / (tp * pp))) -gt 1 ] && [ $((RANDOM % 2)) -eq 1 ] && strategy=zero1
  target=$((RANDOM % (np + 1) - 1))  # -1: every rank
  ckpt=$work/ckpt_$trial
  fault="$point:$step"
  [ "$target" -ge 0 ] && fault="$fault:$target"
  out=$(BRAID_CKPT_FAULT=$fault BRAID_COLLECTIVE_TIMEOUT_S=10 \
        run "$np" --dir "$ckpt" --data "$work/data" --mode "$mode" --tp "$tp" --pp "$pp" \
          --strategy "$strategy" 2>&1)
  status=$?
  if [ "$point" = enospc ] && ! grep -q "No space left on device" <<<"$out"; then
    echo "trial $trial ($fault, $mode): the full disk was not reported: $out"
    failures=$((failures + 1))
    continue
  fi
  verify=$(BRAID_COLLECTIVE_TIMEOUT_S=10 run "$vnp" --dir "$ckpt" --data "$work/data" \
           --mode "$mode" --tp "$vtp" --pp "$vpp" --verify 2>&1)
  if [ $? -ne 0 ] || ! grep -q "verified: resumed at step" <<<"$verify"; then
    echo "trial $trial ($fault, $mode, $np ranks tp=$tp pp=$pp $strategy, exit $status; verified as" \
         "$vnp ranks tp=$vtp pp=$vpp): the last checkpoint did not load:"
    echo "$verify" | tail -5
    failures=$((failures + 1))
    continue
  fi
  resumed=$(grep -o "resumed at step [0-9]*" <<<"$verify")
  echo "trial $trial: $fault $mode on $np rank(s) tp=$tp pp=$pp $strategy, exit $status ->" \
       "$resumed as $vnp rank(s) tp=$vtp pp=$vpp"
done
echo "$((trials - failures)) of $trials trials recovered"
[ "$failures" -eq 0 ]
