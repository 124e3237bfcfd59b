// Sends one chat completion streamed (with stream_options.include_usage)
// and the same one not streamed through an OpenAI-compatible endpoint with
// the official openai package, and prints what it received as one JSON
// line. Usage: node chat.mjs BASE_URL
// MODEL MESSAGES [STOP], where MESSAGES is a JSON array of {role, content}
// and STOP a JSON array of stop strings.
import OpenAI from "openai";

const [baseURL, model, messagesJSON, stopJSON] = process.argv.slice(2);
const messages = JSON.parse(messagesJSON);
const client = new OpenAI({ baseURL, apiKey: "dummy-key", maxRetries: 0, timeout: 30_000 });
const params = { model, messages, stream: true, stream_options: { include_usage: true } };
if (stopJSON) params.stop = JSON.parse(stopJSON);
const stream = await client.chat.completions.create(params);
const deltas = [];
let finish = null;
let usage = null;
for await (const chunk of stream) {
  const choice = chunk.choices[0];
  if (choice?.delta?.content) deltas.push(choice.delta.content);
  finish = choice?.finish_reason ?? finish;
  usage = chunk.usage ?? usage; // the last chunk's, with no choices
}
const { stream: _s, stream_options: _o, ...plain } = params;
const whole = await client.chat.completions.create(plain);
console.log(JSON.stringify({
  deltas, finish, usage,
  whole: { content: whole.choices[0].message.content, finish: whole.choices[0].finish_reason, usage: whole.usage },
}));
