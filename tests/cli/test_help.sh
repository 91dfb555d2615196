#!/usr/bin/env bash
# Checks one binary's command line: --help and -h print the usage with an example to stdout and
# exit 0; an unknown flag and a flag without its value each print one line naming it, then the
# usage, to stderr and exit 2. Runs nothing else (no training), so it is fast.
#   test_help.sh [--schema] [--valued FLAG] BINARY [ARGS...]
# ARGS come before the flag under test (a subcommand: braid-ckpt verify); --valued names a flag
# that takes a value; --schema also expects the training config's schema to be named.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
schema=0
valued=
while [ $# -gt 0 ]; do
  case "$1" in
    --schema) schema=1; shift ;;
    --valued) valued=$2; shift 2 ;;
    *) break ;;
  esac
done
binary=$1
shift
name=$(basename "$binary")
work=$(mktemp -d "${TMPDIR:-/tmp}/braid_cli_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $name $*" >&2
  for f in out err; do [ -s "$work/$f" ] && { echo "--- std$f:" >&2; cat "$work/$f" >&2; }; done
  exit 1
}
# run ARGS...: runs the binary with the prefix arguments, keeps stdout, stderr and the status.
run() {
  set +e
  "$binary" "$@" >"$work/out" 2>"$work/err" </dev/null
  status=$?
  set -e
}

for help in --help -h; do
  run "$@" "$help"
  [ "$status" -eq 0 ] || fail "$help: exit $status, expected 0"
  grep -q "^usage: " "$work/out" || fail "$help: no 'usage:' line on stdout"
  grep -q "^example:" "$work/out" || fail "$help: no 'example:' on stdout"
  # The example is a command line of this binary.
  grep -A1 "^example:" "$work/out" | grep -q "$name" || fail "$help: the example does not run $name"
  grep -q -- "--help" "$work/out" || fail "$help: the usage does not list --help"
  if [ "$schema" -eq 1 ]; then
    grep -q "src/proto/train_config.proto" "$work/out" || fail "$help: the config schema is not named"
    [ -f "$root/src/proto/train_config.proto" ] || fail "names a schema file that does not exist"
  fi
done
cp "$work/out" "$work/help.txt"

# expect_usage_error WHAT NEEDLE ARGS...: exit 2, the first stderr line names NEEDLE, then the
# same usage --help prints, nothing on stdout.
expect_usage_error() {
  local what=$1 needle=$2
  shift 2
  run "$@"
  [ "$status" -eq 2 ] || fail "$what: exit $status, expected 2"
  head -n1 "$work/err" | grep -qF -- "$needle" || fail "$what: the first stderr line does not name '$needle'"
  grep -q "^usage: " "$work/err" || fail "$what: no usage on stderr"
  tail -n +2 "$work/err" | diff -q - "$work/help.txt" >/dev/null ||
    fail "$what: stderr after the first line is not the usage --help prints"
  [ ! -s "$work/out" ] || fail "$what: wrote to stdout"
}

expect_usage_error "an unknown flag" "--no-such-flag" "$@" --no-such-flag
if [ -n "$valued" ]; then
  expect_usage_error "$valued without its value" "$valued" "$@" "$valued"
fi
echo "PASS: $name $*"
