#!/usr/bin/env bash
# Runs a command that must FAIL: passes when it exits non-zero within a time limit and, when
# asked, its output matches a regular expression. Used by ctest for the fault scenarios, where
# "fails fast with the right diagnosis" is the success criterion and a hang is the bug.
#   expect_failure.sh --max-seconds S [--expect REGEX] -- command args...   (S: whole seconds)
set -uo pipefail
max_seconds=
expect=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-seconds) max_seconds=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "expect_failure.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$max_seconds" && $# -gt 0 ]] || { echo "usage: $0 --max-seconds S [--expect RE] -- cmd" >&2; exit 2; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start_ms=$(($(date +%s%N) / 1000000))
# The limit is enforced here too (with a margin for the kill), so a hang fails with a message.
timeout --kill-after=5 "$((max_seconds + 10))" "$@" >"$log" 2>&1
rc=$?
elapsed_ms=$(($(date +%s%N) / 1000000 - start_ms))
elapsed=$(printf "%d.%03d" $((elapsed_ms / 1000)) $((elapsed_ms % 1000)))
cat "$log"
echo "expect_failure.sh: exit code $rc after ${elapsed}s (limit ${max_seconds}s)"

status=0
if [[ $rc -eq 0 ]]; then
  echo "expect_failure.sh: FAIL: the command succeeded but must fail"; status=1
elif (( (rc == 124 || rc == 137) && elapsed_ms >= (max_seconds + 10) * 1000 )); then
  # 137 alone is no hang: mpirun reports a rank killed by SIGKILL that way.
  echo "expect_failure.sh: FAIL: the command hung and was killed"; status=1
fi
if (( elapsed_ms > max_seconds * 1000 )); then
  echo "expect_failure.sh: FAIL: took longer than ${max_seconds}s"; status=1
fi
if [[ -n "$expect" ]] && ! grep -Eq -- "$expect" "$log"; then
  echo "expect_failure.sh: FAIL: output does not match: $expect"; status=1
fi
[[ $status -eq 0 ]] && echo "expect_failure.sh: PASS"
exit $status
