#!/usr/bin/env bash
# A run's life from outside, end to end under mpirun: SIGTERM on every rank mid-run (as Slurm
# sends it) stops every rank after the same step with a checkpoint and exit status 75, and the
# rerun's losses continue those of an uninterrupted run to the last printed digit (dp2 and pp2);
# a second run started on a checkpoint folder in use exits 2 naming the holder's pid and host.
#   tests/dist/run_control.sh BUILD_DIR
set -uo pipefail
build=$1
bin=$build/tests/dist/braid_fault_checkpoint
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# shellcheck source=launch.sh
source "$(dirname "${BASH_SOURCE[0]}")/launch.sh"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
losses() { grep "^loss " "$1"; }
export BRAID_COLLECTIVE_TIMEOUT_S=30

# "name ranks tp pp strategy"
for layout in "dp2 2 1 1 ddp" "pp2 2 1 2 auto"; do
  read -r name np tp pp strategy <<<"$layout"
  args=(--data "$work/data" --mode async --tp "$tp" --pp "$pp" --strategy "$strategy" --steps 300
        --losses)
  launch "$np" --dir "$work/straight_$name" "${args[@]}" >"$work/straight_$name.log" 2>&1
  wait "$launched" || fail "$name: the uninterrupted run failed: $(tail -3 "$work/straight_$name.log")"
  ckpt=$work/ckpt_$name
  launch "$np" --dir "$ckpt" "${args[@]}" >"$work/stopped_$name.log" 2>&1
  wait_for "$ckpt/step_00000004/manifest.pb" "$launched"
  terminate_ranks "$np" "$launched"
  wait "$launched"
  status=$?
  stopped=$(grep -o "stopped after [0-9]*" "$work/stopped_$name.log" | grep -o "[0-9]*$")
  if [ "$status" -ne 75 ] || [ -z "$stopped" ] || [ "$stopped" -ge 300 ]; then
    fail "$name: SIGTERM gave exit $status, not 75 after a step below 300: $(tail -3 "$work/stopped_$name.log")"
    continue
  fi
  grep -q "stopped by SIGTERM after step $stopped of 300: checkpoint step $stopped is committed" \
    "$work/stopped_$name.log" || fail "$name: no stop line naming step $stopped"
  launch "$np" --dir "$ckpt" "${args[@]}" >"$work/resumed_$name.log" 2>&1
  wait "$launched" || fail "$name: the resumed run failed: $(tail -3 "$work/resumed_$name.log")"
  grep -q "finished 300 steps (from step $stopped)" "$work/resumed_$name.log" ||
    fail "$name: the rerun did not resume at step $stopped"
  if ! diff <(losses "$work/straight_$name.log") \
            <(cat <(losses "$work/stopped_$name.log") <(losses "$work/resumed_$name.log")) >/dev/null; then
    fail "$name: stopped at $stopped and resumed, the losses differ from the uninterrupted run"
  else
    echo "ok: $name stopped by SIGTERM after step $stopped (exit 75); resumed, 300 losses equal"
  fi
done

# The run lock: a second run on a folder in use, alone and on two ranks, exits 2 naming the first.
ckpt=$work/ckpt_locked
launch 1 --dir "$ckpt" --data "$work/data" --mode async --steps 100000000 >"$work/first.log" 2>&1
first=$launched
wait_for "$ckpt/step_00000002/manifest.pb" "$first" >/dev/null 2>&1
for np in 1 2; do
  launch "$np" --dir "$ckpt" --data "$work/data" --mode async --steps 4 >"$work/second_$np.log" 2>&1
  wait "$launched"
  status=$?
  expected="checkpoint dir $ckpt is in use by pid $first on host $(hostname)"
  if [ "$status" -ne 2 ] || ! grep -qF "$expected" "$work/second_$np.log"; then
    fail "a second run on $np rank(s): exit $status, expected 2 and '$expected': $(tail -3 "$work/second_$np.log")"
  else
    echo "ok: a second run on $np rank(s) exits 2: $expected"
  fi
done
kill -TERM "$first"
wait "$first"
status=$?
[ "$status" -eq 75 ] || fail "the first run, stopped by SIGTERM, exited $status, not 75"
[ "$failures" -eq 0 ]
