// Drives one application case through an OpenAI-compatible endpoint with
// the real client packages and prints what the application got as one
// JSON line; an error prints {"error": ...} and exits 1. Usage:
//   node apps.mjs BASE_URL MODEL CASE
// CASE is one of the keys of `cases` below.
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { generateObject, generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI, OpenAI as LangChainOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { AIMessage, HumanMessage, SystemMessage } from "@langchain/core/messages";
import { tool as langchainTool } from "@langchain/core/tools";
import { z } from "zod";

const [baseURL, model, which] = process.argv.slice(2);
const apiKey = "dummy-key";
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
const Person = z.object({ name: z.string(), age: z.number() });
const ask = [{ role: "user", content: "Who is Ada? Answer in JSON." }];

// The tool-calling cases' tools (TestToolApps): get_weather by a zod
// schema, get_time by a JSON schema, each returning a fixed text that the
// tests look for in the next step's prompt.
const weatherQuestion = "What is the weather and the time in Paris?";
const weatherResult = (city) => `sunny, 21 C in ${city}`;
const timeResult = (city) => `14:05 in ${city}`;
const citySchema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false };
const aiTools = () => ({
  get_weather: tool({ description: "Get the current weather in a city", inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => weatherResult(city) }),
  get_time: tool({ description: "Get the local time in a city", inputSchema: jsonSchema(citySchema), execute: async ({ city }) => timeResult(city) }),
});
// steps is what a tool loop's steps were: each one's finish, text, calls
// (name, parsed input, id) and results.
const steps = (r) =>
  r.steps.map((s) => ({
    finish: s.finishReason,
    text: s.text,
    calls: s.toolCalls.map((c) => ({ name: c.toolName, input: c.input, id: c.toolCallId })),
    results: s.toolResults.map((x) => ({ name: x.toolName, id: x.toolCallId, output: x.output })),
  }));
const openAITools = [
  { type: "function", function: { name: "get_weather", description: "Get the current weather in a city", parameters: citySchema } },
  { type: "function", function: { name: "get_time", description: "Get the local time in a city", parameters: citySchema } },
];
const langchainTools = [
  langchainTool(async ({ city }) => weatherResult(city), { name: "get_weather", description: "Get the current weather in a city", schema: z.object({ city: z.string() }) }),
  langchainTool(async ({ city }) => timeResult(city), { name: "get_time", description: "Get the local time in a city", schema: z.object({ city: z.string() }) }),
];
const langchainCalls = (m) => ({
  content: m.content,
  calls: (m.tool_calls ?? []).map((c) => ({ name: c.name, args: c.args, id: c.id })),
  invalid: m.invalid_tool_calls ?? [],
  reasoning: m.additional_kwargs?.reasoning_content ?? null,
});

const cases = {
  // The openai package's parse helper: response_format json_schema, strict.
  "openai-parse": async () => {
    const r = await client.chat.completions.parse({ model, messages: ask, response_format: zodResponseFormat(Person, "person") });
    return { parsed: r.choices[0].message.parsed, finish: r.choices[0].finish_reason };
  },
  // n: 2, whole and streamed: two choices told apart by index.
  "openai-n2": async () => {
    const whole = await client.chat.completions.create({ model, messages: ask, n: 2, max_tokens: 4 });
    const stream = await client.chat.completions.create({ model, messages: ask, n: 2, max_tokens: 4, stream: true, stream_options: { include_usage: true } });
    const streamed = {};
    let usage = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) streamed[c.index] = (streamed[c.index] ?? "") + (c.delta?.content ?? "");
      usage = chunk.usage ?? usage;
    }
    return { whole: whole.choices.map((c) => ({ index: c.index, content: c.message.content, finish: c.finish_reason })), wholeUsage: whole.usage, streamed, usage };
  },
  // A history replayed as an application stores it from OpenAI: an
  // assistant message with annotations, refusal and the parse helper's
  // parsed, and names on the turns.
  "openai-history": async () => {
    const messages = [
      { role: "developer", content: "Answer briefly." },
      { role: "user", name: "alice", content: "Hi" },
      { role: "assistant", content: "Hello!", refusal: null, annotations: [], parsed: null, audio: null, tool_calls: [] },
      { role: "user", name: "bob", content: "Who is Ada?" },
    ];
    const r = await client.chat.completions.create({ model, messages, max_tokens: 4, prompt_cache_key: "thread-1", safety_identifier: "user-1", store: false });
    return { content: r.choices[0].message.content, finish: r.choices[0].finish_reason };
  },
  // The AI SDK's generateObject through the chat completions provider.
  "ai-generate-object": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const r = await generateObject({ model: openai.chat(model), schema: Person, prompt: "Who is Ada?", maxRetries: 0 });
    return { object: r.object, finish: r.finishReason };
  },
  // LangChain's completions class, which always sends prompt: [...].
  "langchain-completions": async () => {
    const llm = new LangChainOpenAI({ model, apiKey, maxTokens: 4, maxRetries: 0, configuration: { baseURL } });
    const text = await llm.invoke("Hello");
    const batch = await llm.generate(["Hello", "Bye"]);
    return { text, batch: batch.generations.map((g) => g.map((x) => x.text)) };
  },
  // LangChain's withStructuredOutput with a JSON schema.
  "langchain-structured": async () => {
    const llm = new ChatOpenAI({ model, apiKey, maxRetries: 0, configuration: { baseURL } });
    const object = await llm.withStructuredOutput(Person, { method: "jsonSchema", name: "person" }).invoke("Who is Ada?");
    return { object };
  },
  // LangChain replaying a group chat: names on the turns.
  "langchain-history": async () => {
    const llm = new ChatOpenAI({ model, apiKey, maxTokens: 4, maxRetries: 0, configuration: { baseURL } });
    const r = await llm.invoke([
      new SystemMessage("Answer briefly."),
      new HumanMessage({ content: "Hi", name: "alice" }),
      new AIMessage({ content: "Hello!", name: "assistant" }),
      new HumanMessage({ content: "Who is Ada?", name: "bob" }),
    ]);
    return { content: r.content };
  },
  // The openai package's Responses API, whole and streamed.
  "openai-responses": async () => {
    const whole = await client.responses.create({ model, instructions: "Answer briefly.", input: "Who is Ada?", max_output_tokens: 16 });
    const stream = await client.responses.create({ model, input: [{ role: "user", content: "Who is Ada?" }], stream: true });
    let streamed = "";
    const events = [];
    let final = null;
    for await (const e of stream) {
      events.push(e.type);
      if (e.type === "response.output_text.delta") streamed += e.delta;
      if (e.type === "response.completed") final = e.response;
    }
    return { text: whole.output_text, status: whole.status, id: whole.id, usage: whole.usage, streamed, events, finalText: final?.output_text ?? final?.output?.[0]?.content?.[0]?.text, finalStatus: final?.status };
  },
  // Logprobs on /v1/responses: include message.output_text.logprobs with
  // top_logprobs, whole and streamed (each delta's, then the done event's).
  "openai-responses-logprobs": async () => {
    const req = { model, input: "Who is Ada?", include: ["message.output_text.logprobs"], top_logprobs: 2 };
    const whole = await client.responses.create(req);
    const stream = await client.responses.create({ ...req, stream: true });
    let text = "";
    const deltas = [];
    let done = null;
    for await (const e of stream) {
      if (e.type === "response.output_text.delta") { text += e.delta; deltas.push(...e.logprobs); }
      if (e.type === "response.output_text.done") done = e.logprobs;
    }
    return {
      whole: { content: whole.output_text, logprobs: whole.output[0].content[0].logprobs },
      streamed: { content: text, logprobs: deltas },
      done: { content: text, logprobs: done },
    };
  },
  // Structured output on /v1/responses: the openai package's
  // responses.parse (text.format json_schema) and the AI SDK's
  // generateObject with openai(model).
  "responses-structured": async () => {
    const r = await client.responses.parse({ model, input: "Who is Ada?", text: { format: zodTextFormat(Person, "person") } });
    const openai = createOpenAI({ baseURL, apiKey });
    const o = await generateObject({ model: openai(model), schema: Person, prompt: "Who is Ada?", maxRetries: 0 });
    return { parsed: r.output_parsed, object: o.object };
  },
  // The AI SDK's streamText with the default provider, openai(model),
  // which posts to /v1/responses.
  "ai-stream-text": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const r = streamText({ model: openai(model), prompt: "Who is Ada?", maxRetries: 0 });
    let text = "";
    for await (const delta of r.textStream) text += delta;
    return { text, finish: await r.finishReason, usage: await r.usage };
  },
  // A two-turn conversation with generateText and openai(model), turn two
  // replaying turn one's response.messages: the assistant turn goes as an
  // item_reference to its message's id (store is not false).
  "ai-two-turn": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const messages = [{ role: "user", content: "Who is Ada?" }];
    const one = await generateText({ model: openai(model), messages, maxRetries: 0 });
    messages.push(...one.response.messages, { role: "user", content: "And Grace?" });
    const two = await generateText({ model: openai(model), messages, maxRetries: 0 });
    return { one: one.text, two: two.text };
  },
  // The same after a streamed turn one, whose message id cannot carry its
  // text: with store false the assistant turn goes as itself.
  "ai-stream-two-turn": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const messages = [{ role: "user", content: "Who is Ada?" }];
    const one = streamText({ model: openai(model), messages, maxRetries: 0 });
    const text = await one.text;
    messages.push(...(await one.response).messages, { role: "user", content: "And Grace?" });
    let refused = null;
    try {
      await generateText({ model: openai(model), messages, maxRetries: 0 });
    } catch (e) {
      refused = String(e?.message ?? e);
    }
    const two = await generateText({ model: openai(model), messages, maxRetries: 0, providerOptions: { openai: { store: false } } });
    return { one: text, refused, two: two.text };
  },
  // The openai package's embeddings: its default (it asks for base64 and
  // decodes it), float asked explicitly, and a list of inputs.
  "openai-embeddings": async () => {
    const input = "Hello world";
    const byDefault = await client.embeddings.create({ model, input });
    const float = await client.embeddings.create({ model, input, encoding_format: "float" });
    const list = await client.embeddings.create({ model, input: ["Hello world", "Bye"] });
    return {
      default: byDefault.data[0].embedding,
      float: float.data[0].embedding,
      list: list.data.map((d) => ({ index: d.index, embedding: d.embedding })),
      usage: list.usage,
      model: byDefault.model,
    };
  },
  // LangChain's OpenAIEmbeddings: embedQuery and embedDocuments.
  "langchain-embeddings": async () => {
    const embeddings = new OpenAIEmbeddings({ model, apiKey, maxRetries: 0, configuration: { baseURL } });
    return { query: await embeddings.embedQuery("Hello world"), documents: await embeddings.embedDocuments(["Hello world", "Bye"]) };
  },
  // Chat with logprobs and top_logprobs, whole and streamed: each
  // position's token, logprob, bytes and alternatives.
  "openai-chat-logprobs": async () => {
    const req = { model, messages: ask, logprobs: true, top_logprobs: 2 };
    const whole = await client.chat.completions.create(req);
    const stream = await client.chat.completions.create({ ...req, stream: true });
    let content = "";
    const streamed = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        content += c.delta?.content ?? "";
        streamed.push(...(c.logprobs?.content ?? []));
      }
    }
    const w = whole.choices[0];
    return { whole: { content: w.message.content, logprobs: w.logprobs.content }, streamed: { content, logprobs: streamed } };
  },
  // Completions with logprobs, whole and streamed, and lm-eval-harness's
  // loglikelihood request: echo, logprobs 1, max_tokens 0.
  "openai-completion-logprobs": async () => {
    const whole = await client.completions.create({ model, prompt: "Hello world", logprobs: 2 });
    const stream = await client.completions.create({ model, prompt: "Hello world", logprobs: 2, stream: true });
    const streamed = { text: "", tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        streamed.text += c.text;
        for (const k of ["tokens", "token_logprobs", "top_logprobs", "text_offset"]) streamed[k].push(...(c.logprobs?.[k] ?? []));
      }
    }
    const echo = await client.completions.create({ model, prompt: "Hello world", echo: true, logprobs: 1, max_tokens: 0 });
    const w = whole.choices[0];
    return {
      whole: { text: w.text, ...w.logprobs },
      streamed,
      echo: { text: echo.choices[0].text, ...echo.choices[0].logprobs },
    };
  },
  // The AI SDK's tool loop through the chat completions provider: two
  // tools, stopWhen stepCountIs(3).
  "ai-tools-chat": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const r = await generateText({ model: openai.chat(model), tools: aiTools(), stopWhen: stepCountIs(3), prompt: weatherQuestion, maxRetries: 0 });
    return { text: r.text, finish: r.finishReason, steps: steps(r) };
  },
  // The same through the default provider, openai(model): /v1/responses,
  // store not false, so step two sends step one's text as an
  // item_reference (the calls go whole).
  "ai-tools-responses": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const r = await generateText({ model: openai(model), tools: aiTools(), stopWhen: stepCountIs(3), prompt: weatherQuestion, maxRetries: 0 });
    return { text: r.text, finish: r.finishReason, steps: steps(r) };
  },
  // The loop streamed with streamText and openai(model), store false: the
  // calls arrive as the Responses API's function_call events.
  "ai-tools-responses-stream": async () => {
    const openai = createOpenAI({ baseURL, apiKey });
    const r = streamText({ model: openai(model), tools: aiTools(), stopWhen: stepCountIs(3), prompt: weatherQuestion, maxRetries: 0, providerOptions: { openai: { store: false } } });
    let streamed = "";
    for await (const delta of r.textStream) streamed += delta;
    return { text: await r.text, streamed, finish: await r.finishReason, steps: steps({ steps: await r.steps }) };
  },
  // The openai package's Responses API with tools, streamed: the event
  // types in order and the final response's function_call items.
  "openai-responses-tools": async () => {
    const tools = openAITools.map((t) => ({ type: "function", name: t.function.name, description: t.function.description, parameters: t.function.parameters, strict: false }));
    const stream = await client.responses.create({ model, input: weatherQuestion, tools, stream: true });
    const events = [];
    let args = "";
    let final = null;
    for await (const e of stream) {
      events.push(e.type);
      if (e.type === "response.function_call_arguments.delta") args += e.delta;
      if (e.type === "response.completed") final = e.response;
    }
    const calls = (final?.output ?? []).filter((o) => o.type === "function_call").map((o) => ({ name: o.name, arguments: o.arguments, callId: o.call_id, id: o.id, status: o.status }));
    return { events, args, calls, status: final?.status };
  },
  // LangChain's bindTools and invoke, whole and streamed (the chunks
  // concatenated as LangChain's docs do).
  "langchain-tools": async () => {
    const llm = new ChatOpenAI({ model, apiKey, maxRetries: 0, configuration: { baseURL } }).bindTools(langchainTools);
    const whole = await llm.invoke(weatherQuestion);
    let acc = null;
    for await (const chunk of await llm.stream(weatherQuestion)) acc = acc === null ? chunk : acc.concat(chunk);
    return { whole: langchainCalls(whole), streamed: langchainCalls(acc) };
  },
  // The openai package's runTools loop, whole and streamed: the function
  // runs on the model's call and its result goes back.
  "openai-run-tools": async () => {
    const got = [];
    const tools = [{
      type: "function",
      function: { name: "get_weather", description: "Get the current weather in a city", parameters: citySchema, parse: JSON.parse, function: (args) => { got.push(args); return weatherResult(args.city); } },
    }];
    const run = async (stream) => {
      const runner = client.chat.completions.runTools({ model, messages: [{ role: "user", content: weatherQuestion }], tools, stream });
      const content = await runner.finalContent();
      return { content, roles: runner.messages.map((m) => m.role), completions: runner.allChatCompletions().length };
    };
    const whole = await run(false);
    const streamed = await run(true);
    return { whole, streamed, args: got };
  },
  // A thinking model's answer: reasoning, then a call, in one stream, as
  // the openai package gets the deltas (and the same not streamed), and
  // as LangChain reads it.
  "openai-thinking-tools": async () => {
    const req = { model, messages: [{ role: "user", content: weatherQuestion }], tools: openAITools };
    const stream = await client.chat.completions.create({ ...req, stream: true });
    const deltas = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        const d = c.delta ?? {};
        if (d.reasoning_content) deltas.push({ reasoning: d.reasoning_content });
        if (d.content) deltas.push({ content: d.content });
        for (const tc of d.tool_calls ?? []) deltas.push({ call: tc });
        finish = c.finish_reason ?? finish;
      }
    }
    const w = (await client.chat.completions.create(req)).choices[0];
    const llm = new ChatOpenAI({ model, apiKey, maxRetries: 0, configuration: { baseURL } }).bindTools(langchainTools);
    let acc = null;
    for await (const chunk of await llm.stream(weatherQuestion)) acc = acc === null ? chunk : acc.concat(chunk);
    return {
      deltas,
      finish,
      whole: { content: w.message.content, reasoning: w.message.reasoning_content ?? null, calls: w.message.tool_calls ?? [], finish: w.finish_reason },
      langchain: langchainCalls(acc),
    };
  },
};

try {
  if (!cases[which]) throw new Error(`no case ${which}; cases: ${Object.keys(cases).join(", ")}`);
  console.log(JSON.stringify(await cases[which]()));
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.message ?? e), status: e?.status ?? null }));
  process.exit(1);
}
