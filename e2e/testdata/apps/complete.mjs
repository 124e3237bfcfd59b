// Streams one completion (with stream_options.include_usage) through an
// OpenAI-compatible endpoint with the official openai package, as an
// ordinary client would, and prints what it received as one JSON line. Usage: node complete.mjs BASE_URL MODEL PROMPT,
// where PROMPT is JSON: a string, or an array of token ids.
import OpenAI from "openai";

const [baseURL, model, promptJSON] = process.argv.slice(2);
const prompt = JSON.parse(promptJSON);
const client = new OpenAI({ baseURL, apiKey: "dummy-key", maxRetries: 0, timeout: 30_000 });
const stream = await client.completions.create({
  model, prompt, max_tokens: 8, stream: true, stream_options: { include_usage: true },
});
let text = "";
let chunks = 0;
let finish = null;
let usage = null;
for await (const chunk of stream) {
  chunks++;
  const choice = chunk.choices[0];
  text += choice?.text ?? "";
  finish = choice?.finish_reason ?? finish;
  usage = chunk.usage ?? usage; // the last chunk's, with no choices
}
console.log(JSON.stringify({ chunks, text, finish, usage }));
