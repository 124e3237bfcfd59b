// B11's reference: @lenml/tokenizers (transformers.js) encoding the same
// text with the same tokenizer.json as vigil's tokenizer module, timed
// in this process after warm-up runs. Run by vigil-bench:
//   node tokenizer.js NODE_MODULES MODEL_DIR TEXT_FILE WARM RUNS
// prints {"ns": [each timed run's nanoseconds], "tokens": N}.
const fs = require("fs");
const path = require("path");

const [npm, dir, textFile, warm, runs] = process.argv.slice(2);
const { TokenizerLoader } = require(path.join(npm, "@lenml/tokenizers"));
const read = (f) => {
  const p = path.join(dir, f);
  return fs.existsSync(p) ? JSON.parse(fs.readFileSync(p, "utf8")) : {};
};
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"), tokenizerConfig: read("tokenizer_config.json") });
const text = fs.readFileSync(textFile, "utf8");
const encode = () => tok.encode(text, { add_special_tokens: false });

let tokens = 0;
for (let i = 0; i < Number(warm); i++) tokens = encode().length;
const ns = [];
for (let i = 0; i < Number(runs); i++) {
  const start = process.hrtime.bigint();
  encode();
  ns.push(Number(process.hrtime.bigint() - start));
}
process.stdout.write(JSON.stringify({ ns, tokens }) + "\n");
