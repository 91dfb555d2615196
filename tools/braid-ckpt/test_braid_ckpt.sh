#!/usr/bin/env bash
# End-to-end test of braid-ckpt on a tiny real checkpoint: inspect, verify (intact, then with a
# flipped byte and a missing rank manifest), export to safetensors checked with python3, import
# of that file (the same logits to the bit, resharded too; a run resuming from it trains as one
# with model.init_from the file, under ZeRO-1 too; a file lacking a tensor is refused), verify
# and export of a stored config that no longer parses, convert to tp=2 x pp=2 and back
# (bit-identical), and verify catching one flipped bit anywhere in any file of both.
#   test_braid_ckpt.sh BRAID_CKPT BRAID_CKPT_MAKE_TEST
set -euo pipefail

tool=$1
make_test=$2
command -v python3 >/dev/null || { echo "python3 not found: skipping"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/braid_ckpt_test.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect_in FILE PATTERN: the file has a line matching the (extended) regex; shows it otherwise.
expect_in() {
  grep -Eq -- "$2" "$1" || { cat "$1" >&2; fail "expected /$2/ in $(basename "$1")"; }
}

echo "== writing a checkpoint"
"$make_test" "$work" >"$work/make.log" 2>&1 || { cat "$work/make.log" >&2; fail "helper failed"; }
ckpt=$work/ckpt
step=$(cat "$ckpt/latest")

echo "== help and usage errors"
"$tool" --help >"$work/help.txt"
for command in inspect verify export; do expect_in "$work/help.txt" "^  $command PATH"; done
expect_in "$work/help.txt" "^  import GPT2\.safetensors OUT_DIR --n-head H"
if "$tool" frobnicate "$ckpt" 2>"$work/err.txt"; then fail "an unknown command succeeded"; fi
expect_in "$work/err.txt" "unknown command 'frobnicate'"
if "$tool" inspect "$work/no_such_dir" 2>"$work/err.txt"; then fail "inspect of a missing path succeeded"; fi
expect_in "$work/err.txt" "no_such_dir does not exist"

echo "== inspect"
"$tool" inspect "$ckpt" --config >"$work/inspect.txt"
expect_in "$work/inspect.txt" "^checkpoint +$ckpt/$step$"
expect_in "$work/inspect.txt" "^step +2$"
expect_in "$work/inspect.txt" "^grid +tp=1 cp=1 pp=1 dp=1$"
expect_in "$work/inspect.txt" "^shard files +1 file, [0-9]+ bytes"
expect_in "$work/inspect.txt" "^  model/blocks\.0\.attn\.qkv\.weight +\[96, 32\] +1 +12288$"
expect_in "$work/inspect.txt" "^  optim/blocks\.0\.attn\.qkv\.weight/"
expect_in "$work/inspect.txt" "vocab_size: [0-9]+"
first_model=$(grep -n -m1 "^  model/" "$work/inspect.txt" | cut -d: -f1)
first_optim=$(grep -n -m1 "^  optim/" "$work/inspect.txt" | cut -d: -f1)
[ "$first_model" -lt "$first_optim" ] || fail "optimizer state listed before model tensors"
vocab=$(grep -Eo -m1 "vocab_size: [0-9]+" "$work/inspect.txt" | grep -Eo "[0-9]+")

echo "== verify (intact)"
"$tool" verify "$ckpt" >"$work/verify.txt"
expect_in "$work/verify.txt" "^OK: [0-9]+ tensors, [0-9]+ bytes verified"
cp -r "$ckpt/$step" "$work/intact"

echo "== verify (one byte flipped, one rank manifest removed)"
bin=$ckpt/$step/rank_00000.bin
# flip_bits FILE OFFSET MASK: inverts the bits of MASK in one byte, in place.
flip_bits() {
  local old
  old=$(dd if="$1" bs=1 skip="$2" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
  printf "\\$(printf %03o $((old ^ $3)))" | dd of="$1" bs=1 seek="$2" count=1 conv=notrunc 2>/dev/null
}
flip_bits "$bin" $(($(stat -c %s "$bin") / 2)) 0xFF
rm "$ckpt/$step/rank_00000.manifest"
if "$tool" verify "$ckpt" >"$work/verify_bad.txt" 2>&1; then fail "verify passed a corrupt checkpoint"; fi
expect_in "$work/verify_bad.txt" "rank_00000\.bin.*fails its checksum"
expect_in "$work/verify_bad.txt" "rank_00000\.manifest"
expect_in "$work/verify_bad.txt" "^FAILED: .* 2 problems"
# The middle of the file is optimizer state, which export does not read; the file starts with
# the model's tensors.
flip_bits "$bin" 100 0xFF
if "$tool" export "$ckpt" "$work/bad.safetensors" 2>"$work/err.txt"; then fail "export of a corrupt checkpoint succeeded"; fi
expect_in "$work/err.txt" "checksum"

echo "== export (intact copy)"
"$tool" export "$work/intact" "$work/model.safetensors" >"$work/export.txt"
expect_in "$work/export.txt" "^wrote .*model\.safetensors: 28 tensors"
python3 - "$work/model.safetensors" "$vocab" <<'EOF'
# Reads the safetensors header (8-byte little-endian length + JSON) and checks GPT-2 shapes.
import json, struct, sys

path, vocab = sys.argv[1], int(sys.argv[2])
with open(path, "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
C, layers, positions = 32, 2, 16
expected = {"wte.weight": [vocab, C], "wpe.weight": [positions, C], "ln_f.weight": [C], "ln_f.bias": [C]}
for i in range(layers):
    h = f"h.{i}."
    expected.update({
        h + "ln_1.weight": [C], h + "ln_1.bias": [C], h + "ln_2.weight": [C], h + "ln_2.bias": [C],
        h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
        h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
        h + "mlp.c_fc.weight": [C, 4 * C], h + "mlp.c_fc.bias": [4 * C],
        h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C],
    })
metadata = header.pop("__metadata__", {})
got = {name: entry["shape"] for name, entry in header.items()}
assert got == expected, f"shapes differ:\n got {got}\n want {expected}"
assert all(e["dtype"] == "F32" for e in header.values())
assert metadata.get("format") == "pt", metadata
print(f"safetensors OK: {len(got)} tensors, wte {got['wte.weight']}, c_attn {got['h.0.attn.c_attn.weight']}")
EOF
echo "== import (the exported file back into a checkpoint)"
"$tool" import "$work/model.safetensors" "$work/imported" --n-head 2 --seed 3 >"$work/import.txt"
expect_in "$work/import.txt" "^wrote .*/imported/step_00000000: step 0, weights only \(28 tensors\), n_layer 2 n_head 2 n_embd 32 vocab_size $vocab \(padded 320\) block_size 16, tied head, seed 3"
"$tool" verify "$work/imported" >"$work/verify_imported.txt"
expect_in "$work/verify_imported.txt" "^OK: 28 tensors"
"$tool" inspect "$work/imported" >"$work/inspect_imported.txt"
expect_in "$work/inspect_imported.txt" "^step +0$"
expect_in "$work/inspect_imported.txt" "^grid +tp=1 cp=1 pp=1 dp=1$"
if grep -q "^  optim/" "$work/inspect_imported.txt"; then fail "an imported checkpoint holds optimizer state"; fi
# The model the checkpoint holds computes the same logits to the bit as the one exported, and
# so does its conversion to tp=2 x pp=2 (loaded back into one process by the loader's reshard).
"$make_test" --logits "$work/intact" "$work/logits_intact.bin"
"$make_test" --logits "$work/imported" "$work/logits_imported.bin"
cmp "$work/logits_intact.bin" "$work/logits_imported.bin" || fail "export -> import changed the logits"
"$tool" convert "$work/imported" "$work/imported_tp2pp2" --tp 2 --pp 2 >/dev/null
"$tool" verify "$work/imported_tp2pp2" >/dev/null || fail "the resharded import does not verify"
"$make_test" --logits "$work/imported_tp2pp2" "$work/logits_tp2pp2.bin"
cmp "$work/logits_intact.bin" "$work/logits_tp2pp2.bin" || fail "the resharded import changed the logits"
# A run resuming from the imported checkpoint (step 0, fresh optimizer, seed 3) trains exactly as
# one started from the file with model.init_from.
"$make_test" --train "$work" resume "$work/imported" >"$work/train_resume.txt" 2>"$work/train_resume.log" ||
  { cat "$work/train_resume.log" >&2; fail "resuming from the imported checkpoint failed"; }
"$make_test" --train "$work" init_from "$work/model.safetensors" >"$work/train_init.txt" 2>"$work/train_init.log" ||
  { cat "$work/train_init.log" >&2; fail "model.init_from failed"; }
expect_in "$work/train_resume.txt" "^step 2 loss "
cmp "$work/train_resume.txt" "$work/train_init.txt" ||
  { paste "$work/train_resume.txt" "$work/train_init.txt" >&2; fail "resume from the import and init_from differ"; }
# The same under ZeRO-1, whose optimizer state the loader would fill in place.
"$make_test" --train "$work" resume "$work/imported" --set parallel.strategy=zero1 >"$work/train_resume_zero1.txt" 2>"$work/train_resume.log" ||
  { cat "$work/train_resume.log" >&2; fail "resuming from the imported checkpoint under zero1 failed"; }
"$make_test" --train "$work" init_from "$work/model.safetensors" --set parallel.strategy=zero1 >"$work/train_init_zero1.txt" 2>"$work/train_init.log" ||
  { cat "$work/train_init.log" >&2; fail "model.init_from under zero1 failed"; }
cmp "$work/train_resume_zero1.txt" "$work/train_init_zero1.txt" ||
  { paste "$work/train_resume_zero1.txt" "$work/train_init_zero1.txt" >&2; fail "zero1 resume from the import and init_from differ"; }
# Refused: no --n-head (a usage error), an output folder that has the step already, a file that
# lacks a tensor (named, with its expected shape).
status=0
"$tool" import "$work/model.safetensors" "$work/imported2" 2>"$work/err.txt" || status=$?
[ "$status" -eq 2 ] || { cat "$work/err.txt" >&2; fail "import without --n-head: exit $status, expected 2"; }
expect_in "$work/err.txt" "--n-head is needed"
if "$tool" import "$work/model.safetensors" "$work/imported" --n-head 2 2>"$work/err.txt"; then fail "import over an existing step succeeded"; fi
expect_in "$work/err.txt" "step_00000000 already exists"
python3 - "$work/model.safetensors" "$work/lacking.safetensors" <<'EOF'
# Writes the file again without h.1.mlp.c_fc.weight.
import json, struct, sys

with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
header.pop("__metadata__", None)
out, blob = {}, b""
for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
    if name == "h.1.mlp.c_fc.weight":
        continue
    begin, end = e["data_offsets"]
    out[name] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [len(blob), len(blob) + end - begin]}
    blob += data[begin:end]
text = json.dumps(out).encode()
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + blob)
EOF
if "$tool" import "$work/lacking.safetensors" "$work/imported3" --n-head 2 2>"$work/err.txt"; then fail "import of a file lacking a tensor succeeded"; fi
expect_in "$work/err.txt" "1 problem:"
expect_in "$work/err.txt" "^  missing h\.1\.mlp\.c_fc\.weight: expected \[32, 128\]"

echo "== verify and export (a stored config that no longer parses)"
# As a checkpoint of an older braid whose config had a field renamed since: export cannot read
# the vocabulary size from it, so verify must not pass it.
cp -r "$work/intact" "$work/stale"
printf 'model { n_layers: 2 }\n' >"$work/stale_config.txt"
"$make_test" --replace-config "$work/stale" "$work/stale_config.txt" >/dev/null
status=0
"$tool" verify "$work/stale" >"$work/verify_stale.txt" 2>&1 || status=$?
[ "$status" -eq 1 ] || { cat "$work/verify_stale.txt" >&2; fail "verify of a stale config: exit $status, expected 1"; }
expect_in "$work/verify_stale.txt" "^error: .*manifest\.pb \(config\):1:.*n_layers"
expect_in "$work/verify_stale.txt" "^FAILED: .* 1 problem in"
if "$tool" export "$work/stale" "$work/stale.safetensors" 2>"$work/err.txt"; then fail "export of a stale config succeeded"; fi
export_message=$(sed -n 's/^braid-ckpt export: error: //p' "$work/err.txt")
[ -n "$export_message" ] || { cat "$work/err.txt" >&2; fail "export printed no error line"; }
grep -qxF -- "error: $export_message" "$work/verify_stale.txt" ||
  { cat "$work/err.txt" "$work/verify_stale.txt" >&2; fail "verify does not report the message export gives"; }

echo "== convert (offline reshard to tp=2 x pp=2 and back)"
"$tool" convert "$work/intact" "$work/tp2pp2" --tp 2 --pp 2 >"$work/convert.txt"
expect_in "$work/convert.txt" "as tp=2 pp=2 dp=1 \(4 shard files\)"
"$tool" verify "$work/tp2pp2" >"$work/verify_tp2pp2.txt"
expect_in "$work/verify_tp2pp2.txt" "^OK: "
"$tool" inspect "$work/tp2pp2" >"$work/inspect_tp2pp2.txt"
expect_in "$work/inspect_tp2pp2.txt" "^grid +tp=2 cp=1 pp=2 dp=1$"
"$tool" convert "$work/tp2pp2" "$work/back" --tp 1 --pp 1 >/dev/null
# Every value survives the round trip: weights and optimizer state alike, so the single
# shard file is the same bytes as the original.
cmp "$work/intact/rank_00000.bin" "$work/back/$step/rank_00000.bin" ||
  fail "tp=1 -> tp=2 x pp=2 -> tp=1 changed the stored values"
if "$tool" convert "$work/intact" "$work/bad" --tp 3 2>"$work/err.txt"; then fail "tp=3 accepted for 2 heads"; fi
expect_in "$work/err.txt" "tp=3 does not divide model.n_head = 2"

echo "== verify (one bit flipped anywhere in any file)"
# Every byte of a checkpoint is covered: manifests by their CRC, slices by their chunk CRCs,
# the padding between slices by being zero. Each file of the single-rank checkpoint and of its
# 4-rank conversion (9 files), at both ends, the middle and a seeded sample of positions.
RANDOM=7
flips=0
for folder in "$work/intact" "$work/tp2pp2/$step"; do
  for file in "$folder"/*; do
    size=$(stat -c %s "$file")
    cp "$file" "$work/pristine"
    for pos in 0 $((size / 2)) $((size - 1)) $((RANDOM * 32768 % size)) $((RANDOM * 32768 % size)) \
               $(((RANDOM * 32768 + RANDOM) % size)) $(((RANDOM * 32768 + RANDOM) % size)); do
      flip_bits "$file" "$pos" $((1 << (RANDOM % 8)))
      if "$tool" verify "$folder" >"$work/verify_flip.txt" 2>&1; then
        fail "verify passed $(basename "$file") with a bit flipped at byte $pos"
      fi
      expect_in "$work/verify_flip.txt" "error: .*$(basename "$file")"
      cp "$work/pristine" "$file"
      flips=$((flips + 1))
    done
  done
  "$tool" verify "$folder" >/dev/null || fail "$folder does not verify once restored"
done
echo "$flips flipped bits, each reported"

echo "PASS"
