#!/usr/bin/env bash
# braid-tokenize's input checks: a file that is not UTF-8, an empty file and a file of only EOT
# markers each fail naming the file (and the first bad byte's offset); valid text still becomes
# a shard, with the byte tokenizer and, when its vocabulary is present, with gpt2.
#   test_tokenize.sh BRAID_TOKENIZE
set -euo pipefail

tool=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/braid_tokenize_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  [ -s "$work/err" ] && { echo "--- stderr:" >&2; cat "$work/err" >&2; }
  exit 1
}
# expect_failure FILE PATTERN...: tokenising FILE exits 1, writes no shard, and stderr matches
# every (extended) regex.
expect_failure() {
  local input=$1
  shift
  rm -f "$work/out.bin"
  set +e
  "$tool" --tokenizer byte --input "$input" --output "$work/out.bin" >/dev/null 2>"$work/err"
  local status=$?
  set -e
  [ "$status" -eq 1 ] || fail "$(basename "$input"): exit $status, expected 1"
  [ ! -e "$work/out.bin" ] || fail "$(basename "$input"): a shard was written"
  for pattern in "$@"; do
    grep -Eq -- "$pattern" "$work/err" || fail "$(basename "$input"): stderr lacks /$pattern/"
  done
}

echo "== not UTF-8"
# Line 2 ("café café", the second one in Latin-1) holds 0xE9, a lead byte followed by no
# continuation, at byte offset 6 ("valid\n") + 9 ("caf", the UTF-8 é, " caf") = 15.
printf 'valid\ncaf\xc3\xa9 caf\xe9 au lait\n' >"$work/latin1.txt"
expect_failure "$work/latin1.txt" "'$work/latin1.txt' is not valid UTF-8" "byte offset 15 \(line 2, byte 0xE9\)"
# A stray continuation byte first, and a truncated sequence at the very end.
printf '\x80abc' >"$work/continuation.txt"
expect_failure "$work/continuation.txt" "continuation.txt' is not valid UTF-8" "byte offset 0 \(line 1, byte 0x80\)"
printf 'abc\xe6\x97' >"$work/truncated.txt"
expect_failure "$work/truncated.txt" "byte offset 3 \(line 1, byte 0xE6\)"

echo "== empty"
: >"$work/empty.txt"
expect_failure "$work/empty.txt" "'$work/empty.txt' is empty"
printf '<|endoftext|><|endoftext|>' >"$work/only_markers.txt"
expect_failure "$work/only_markers.txt" "'$work/only_markers.txt' holds no text, only 2 EOT markers"

echo "== valid text (byte)"
printf '<|endoftext|>In the beginning \xe6\x97\xa5 \xf0\x9f\x8d\x95\n<|endoftext|>second\n' >"$work/good.txt"
"$tool" --tokenizer byte --input "$work/good.txt" --output "$work/good.bin" >"$work/log" 2>"$work/err" ||
  fail "valid text was rejected"
# One token per byte outside the two 13-byte markers, plus one EOT for each marker.
tokens=$(($(stat -c %s "$work/good.txt") - 2 * 13 + 2))
grep -q "wrote $tokens train tokens" "$work/log" || { cat "$work/log" >&2; fail "expected $tokens tokens"; }
# llm.c shard: a 256 x int32 header, then uint16 tokens.
[ "$(stat -c %s "$work/good.bin")" -eq $((1024 + 2 * tokens)) ] || fail "good.bin has the wrong size"

vocab=${BRAID_DATA_DIR:-$root/data}/gpt2
if [ -f "$vocab/encoder.json" ] && [ -f "$vocab/vocab.bpe" ]; then
  echo "== valid text (gpt2)"
  "$tool" --tokenizer gpt2 --vocab-dir "$vocab" --input "$work/good.txt" --output "$work/gpt2.bin" \
    >"$work/log" 2>"$work/err" || fail "gpt2 rejected valid text"
  grep -Eq "wrote [0-9]+ train tokens" "$work/log" || fail "gpt2 wrote no shard"
else
  echo "(no GPT-2 vocabulary in $vocab: gpt2 skipped)"
fi
echo "PASS"
