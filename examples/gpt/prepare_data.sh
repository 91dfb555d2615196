#!/usr/bin/env bash
# Makes the King James Bible token shards the GPT example trains on (idempotent).
#
#   examples/gpt/prepare_data.sh [--tokenizer gpt2|byte] [--tokenize-bin PATH] [--force]
#   env: BRAID_DATA_DIR (default <repo>/data), BRAID_BUILD_DIR (default <repo>/build)
#
# Writes $BRAID_DATA_DIR/kjv/kjv_train_000.bin and kjv_val_000.bin (GPT-2 BPE), or
# kjv_byte_train_000.bin and kjv_byte_val_000.bin with --tokenizer byte. The text comes from
# the Debian package bible-kjv (installed when `bible` is missing); verse references are
# stripped so the model sees prose, and each of the 66 books is one document (an EOT token
# before it). The last ~5% of tokens, moved to the nearest book start, is the validation set.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
data="${BRAID_DATA_DIR:-$root/data}"
build="${BRAID_BUILD_DIR:-$root/build}"
tokenizer=gpt2
tokenize_bin=""
force=0

while [[ $# -gt 0 ]]; do
  case "$1" in
    --tokenizer) tokenizer="$2"; shift 2 ;;
    --tokenizer=*) tokenizer="${1#*=}"; shift ;;
    --tokenize-bin) tokenize_bin="$2"; shift 2 ;;
    --tokenize-bin=*) tokenize_bin="${1#*=}"; shift ;;
    --force) force=1; shift ;;
    -h | --help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "prepare_data: unknown argument '$1' (expected --tokenizer gpt2|byte," \
         "--tokenize-bin PATH or --force)" >&2; exit 1 ;;
  esac
done

case "$tokenizer" in
  gpt2) prefix=kjv ;;
  byte) prefix=kjv_byte ;;
  *) echo "prepare_data: unknown tokenizer '$tokenizer'; expected gpt2 or byte" >&2; exit 1 ;;
esac
out="$data/kjv"
train="$out/${prefix}_train_000.bin"
val="$out/${prefix}_val_000.bin"
vocab="$data/gpt2"

if [[ "$tokenizer" == gpt2 ]]; then
  "$root/scripts/fetch_gpt2_vocab.sh" >/dev/null
fi

# Up to date: both shards exist and (for GPT-2) are newer than the vocabulary they encode.
if [[ $force -eq 0 && -s "$train" && -s "$val" ]]; then
  if [[ "$tokenizer" == byte || ("$train" -nt "$vocab/vocab.bpe" && "$val" -nt "$vocab/vocab.bpe") ]]; then
    echo "prepare_data: $train and $val are up to date"
    exit 0
  fi
fi

if ! command -v bible >/dev/null; then
  echo "prepare_data: installing bible-kjv (the King James Bible text)"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq bible-kjv >/dev/null
fi

if [[ -z "$tokenize_bin" ]]; then
  tokenize_bin="$build/tools/braid-tokenize/braid-tokenize"
  if [[ ! -x "$tokenize_bin" && -f "$build/CMakeCache.txt" ]]; then
    echo "prepare_data: building braid-tokenize in $build"
    cmake --build "$build" --target braid-tokenize -j"$(nproc)" >/dev/null
  fi
fi
if [[ ! -x "$tokenize_bin" ]]; then
  echo "prepare_data: braid-tokenize not found at '$tokenize_bin'; build it with" \
    "'cmake --build $build --target braid-tokenize', or pass --tokenize-bin PATH" >&2
  exit 1
fi

mkdir -p "$out"
text="$out/kjv.txt"
# "Ge1:1 In the beginning..." -> "In the beginning...". The book is the reference's leading
# letters (with a 1-3 prefix such as 1Sam); a new book starts a new document.
bible -f gen1:1-rev22:21 | LC_ALL=C awk '
  match($0, /^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ /) {
    book = substr($0, 1, RLENGTH)
    sub(/[0-9]+:[0-9]+ $/, "", book)
    if (book != previous) { printf "<|endoftext|>"; previous = book }
    print substr($0, RLENGTH + 1)
    next
  }
  { print }' >"$text.tmp"
mv -f "$text.tmp" "$text"
books=$(grep -o '<|endoftext|>' "$text" | wc -l)
if [[ $books -ne 66 ]]; then
  echo "prepare_data: found $books books in the bible output, expected 66; is bible-kjv complete?" >&2
  exit 1
fi

"$tokenize_bin" --tokenizer "$tokenizer" --vocab-dir "$vocab" --input "$text" \
  --output "$train" --split-val 0.05 --val-output "$val" --eot-marker '<|endoftext|>'
