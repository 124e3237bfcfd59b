#!/usr/bin/env node
// A vigil engine adapter for the toy engine (examples/adapter's), written
// in JavaScript with @grpc/grpc-js and no vigil sdk: go-plugin's handshake
// and vigil.plugin.v1 by hand, plain Generate only (no Multiplex). The e2e
// tests hold it to the sdk's conformance rules with vigil plugin check
// --conformance. It takes the protos from proto/ beside it, and its TLS
// key pair from cert.pem and key.pem there (made by the test: an adapter
// of your own makes a new pair at each start).
//
// NODE_ADAPTER_FAULT=accept-unknown-options makes it break a rule.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

const here = path.dirname(fileURLToPath(import.meta.url));
const fault = process.env.NODE_ADAPTER_FAULT || '';

// go-plugin's handshake: vigil sets the magic cookie; anyone else is told.
const cookieKey = 'VIGIL_PLUGIN_MAGIC_COOKIE';
const cookie = '0b1c8f7e6f3a4d2a9c5e7b1d3f5a7c9e';
if (process.env[cookieKey] !== cookie) {
  console.error('This is a vigil engine adapter: vigil starts it (vigil run --engine-plugin PATH).');
  process.exit(1);
}
const coreProtocol = 1; // go-plugin's
const appProtocol = 1; // vigil.plugin.v1

function load(file) {
  return grpc.loadPackageDefinition(protoLoader.loadSync(path.join(here, 'proto', file), {
    keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true,
    includeDirs: [path.join(here, 'proto')],
  }));
}
const pluginv1 = load('vigil/plugin/v1/engine.proto').vigil.plugin.v1;
const toyv1 = load('toy/v1/toy.proto').toy.v1;
const health = load('grpc/health/v1/health.proto').grpc.health.v1;
const controller = load('plugin/grpc_controller.proto').plugin;

const status = grpc.status;

// fail is a gRPC error as vigil's sdk sends one: its class's code, its
// message after the class's words.
const fail = (code, message, metadata) => ({ code, details: message, metadata });

// fieldError is the sdk's *FieldError: INVALID_ARGUMENT carrying a
// google.rpc.BadRequest field violation, which the host reads back.
function fieldError(field, problem) {
  const violation = concat(bytes(1, field), bytes(2, problem));
  const badRequest = bytes(1, violation);
  const any = concat(bytes(1, 'type.googleapis.com/google.rpc.BadRequest'), bytes(2, badRequest));
  const message = `invalid argument: ${field} ${problem}`;
  const st = concat(varintField(1, status.INVALID_ARGUMENT), bytes(2, message), bytes(3, any));
  const md = new grpc.Metadata();
  md.set('grpc-status-details-bin', st);
  return fail(status.INVALID_ARGUMENT, message, md);
}

// Protocol buffers' wire format, for the three messages above.
function varint(n) {
  const out = [];
  for (; n > 127; n = Math.floor(n / 128)) out.push((n % 128) | 128);
  out.push(n);
  return Buffer.from(out);
}
const concat = (...b) => Buffer.concat(b);
const varintField = (num, n) => concat(varint(num << 3), varint(n));
function bytes(num, v) {
  const b = Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8');
  return concat(varint((num << 3) | 2), varint(b.length), b);
}

const ms = (d, dflt) => (d && (d.seconds || d.nanos) ? d.seconds * 1000 + d.nanos / 1e6 : dflt);
const sleep = (t) => new Promise((resolve) => setTimeout(resolve, t));
const now = () => {
  const t = Date.now();
  return { seconds: Math.floor(t / 1000), nanos: (t % 1000) * 1e6 };
};

// checkAddr is the sdk's rule for an engine address: host:port, port 1-65535.
function checkAddr(addr) {
  const m = /^(\[[^\]]+\]|[^:\s/[\]]+):([0-9]+)$/.exec(addr);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) {
    return fieldError('StartRequest.EngineAddr', `"${addr}": want host:port with a port from 1 to 65535`);
  }
  return null;
}

// The adapter's one engine connection, set by a successful Start.
let engine = null; // { toy, health, addr, policy }

// checkEngine asks the engine's liveness ("" of grpc.health.v1) within
// timeout: 'SERVING', 'NOT_SERVING', or an Error.
function checkEngine(client, timeout) {
  return new Promise((resolve) => {
    client.Check({ service: '' }, { deadline: Date.now() + timeout }, (err, res) => resolve(err || res.status));
  });
}

async function start(call, callback) {
  const req = call.request;
  if (engine) return callback(fail(status.ALREADY_EXISTS, 'already started: the toy adapter'));
  const bad = checkAddr(req.engine_addr);
  if (bad) return callback(bad);
  const unknown = Object.keys(req.options).sort().map((k) => `"${k}"`);
  if (unknown.length > 0 && fault !== 'accept-unknown-options') {
    return callback(fieldError('StartRequest.Options', `${unknown.join(', ')}: unknown key; this adapter takes no engine options`));
  }
  const h = req.health || {};
  const policy = { interval: ms(h.interval, 500), timeout: ms(h.timeout, 1000), failures: h.failures || 2, retryMax: ms(h.retry_max, 5000) };
  const deadline = Date.now() + ms(req.startup_deadline, 30 * 60 * 1000);
  const creds = grpc.credentials.createInsecure();
  const conn = { toy: new toyv1.EngineService(req.engine_addr, creds), health: new health.Health(req.engine_addr, creds) };
  let last = 'no check yet';
  for (let backoff = 10; !call.cancelled; backoff = Math.min(backoff * 2, policy.retryMax)) {
    const left = deadline - Date.now();
    if (left <= 0) break;
    const st = await checkEngine(conn.health, Math.min(policy.timeout, left));
    if (st === 'SERVING') {
      return readWorker(conn, call, callback, { ...conn, addr: req.engine_addr, policy });
    }
    last = st instanceof Error ? st.details || st.message : `health of "" is ${st}`;
    await sleep(Math.min(backoff, Math.max(deadline - Date.now(), 0)));
  }
  conn.toy.close();
  conn.health.close();
  if (call.cancelled) return callback(fail(status.CANCELLED, 'context canceled'));
  callback(fail(status.DEADLINE_EXCEEDED, `startup deadline exceeded: toy engine at ${req.engine_addr} did not serve in time: ${last}`));
}

function readWorker(conn, call, callback, started) {
  conn.toy.Info({}, { deadline: Date.now() + 10000 }, (err, info) => {
    if (err) {
      conn.toy.close();
      conn.health.close();
      return callback(fail(status.UNAVAILABLE, `unavailable: reading toy engine information: ${err.details}`));
    }
    engine = started;
    callback(null, { worker: {
      model_id: info.model, served_model_name: info.model, engine_version: info.version,
      instance_id: info.instance_id, supports_text_input: true,
    } });
  });
}

// watch polls the engine's liveness every policy.interval: an answer of
// NOT_SERVING, or policy.failures checks in a row without an answer, is
// Lost, the stream's last event.
async function watch(call) {
  if (!engine) {
    return call.emit('error', fail(status.FAILED_PRECONDITION, 'not started: WatchAvailability before Start'));
  }
  const { health: client, policy } = engine;
  const send = (availability, reason) => call.write({ availability, reason, time: now() });
  let serving = false;
  let failures = 0;
  while (!call.cancelled && engine) {
    const st = await checkEngine(client, policy.timeout);
    if (call.cancelled) return;
    if (st === 'SERVING') {
      failures = 0;
      if (!serving) send('AVAILABILITY_SERVING', 'toy engine serving');
      serving = true;
    } else if (!(st instanceof Error) || ++failures >= policy.failures) {
      const why = st instanceof Error ? `${failures} checks failed: ${st.details || st.message}` : `health of "" is ${st}`;
      send('AVAILABILITY_LOST', `toy engine lost: ${why}`);
      return call.end();
    }
    await sleep(policy.interval);
  }
  call.end();
}

const finishReasons = {
  FINISH_REASON_STOP: 'FINISH_REASON_STOP',
  FINISH_REASON_LENGTH: 'FINISH_REASON_LENGTH',
  FINISH_REASON_ABORTED: 'FINISH_REASON_CANCELLED',
};

// classify maps an engine error to the sdk's classes, as adapterkit does.
function classify(err, sent) {
  if (sent) return fail(status.UNKNOWN, `toy request failed mid-stream: ${err.details}`);
  switch (err.code) {
    case status.INVALID_ARGUMENT:
      return fail(status.INVALID_ARGUMENT, `invalid argument: toy rejected the request: ${err.details}`);
    case status.UNAVAILABLE:
    case status.RESOURCE_EXHAUSTED:
      return fail(status.UNAVAILABLE, `unavailable: toy: ${err.details}`);
  }
  return fail(status.UNKNOWN, `toy request failed: ${err.details}`);
}

// generate forwards one request; the client going away cancels the engine
// stream, which the toy engine takes for the abort.
function generate(call) {
  const req = call.request;
  if (!engine) return call.emit('error', fail(status.FAILED_PRECONDITION, 'not started: Generate before Start'));
  if (req.ignore_eos) {
    return call.emit('error', fail(status.INVALID_ARGUMENT, 'invalid argument: ignore_eos: the toy engine ends where its prompt ends'));
  }
  const wire = { request_id: req.request_id, max_tokens: req.max_tokens };
  if (req.prompt === 'text') wire.text = req.text;
  else wire.token_ids = req.token_ids ? req.token_ids.ids : [];
  const stream = engine.toy.Generate(wire);
  call.on('cancelled', () => stream.cancel());
  let sent = false;
  let final = null;
  stream.on('data', (m) => {
    if (m.finish_reason !== 'FINISH_REASON_UNSPECIFIED') {
      final = { finish_reason: finishReasons[m.finish_reason] || 'FINISH_REASON_ERROR', prompt_tokens: m.prompt_tokens, completion_tokens: m.completion_tokens };
    } else if (m.token_ids.length > 0 || m.text !== '') {
      call.write({ chunk: { token_ids: m.token_ids, text: m.text } });
      sent = true;
    }
  });
  stream.on('error', (err) => {
    if (!call.cancelled) call.emit('error', classify(err, sent));
  });
  stream.on('end', () => {
    if (call.cancelled) return;
    if (!final) return call.emit('error', fail(status.UNKNOWN, `toy ended request ${req.request_id} without a finish reason`));
    call.write({ final });
    call.end();
  });
}

const server = new grpc.Server();
server.addService(pluginv1.Engine.service, {
  Info: (_, callback) => callback(null, {
    name: 'node', version: '0.1.0',
    // Request fields read: request_id, text, token_ids, max_tokens,
    // ignore_eos (refused); the host refuses a request that sets another.
    capabilities: { readiness: false, generate: true, abort: false, multiplex: false, generate_request_fields: [1, 2, 3, 8, 11] },
  }),
  Start: start,
  WatchAvailability: watch,
  Shutdown: (_, callback) => {
    if (engine) {
      engine.toy.close();
      engine.health.close();
      engine = null;
    }
    callback(null, {});
  },
  Generate: generate,
});
server.addService(health.Health.service, {
  Check: ({ request }, callback) => {
    if (request.service !== '' && request.service !== 'plugin') return callback(fail(status.NOT_FOUND, 'unknown service'));
    callback(null, { status: 'SERVING' });
  },
});
server.addService(controller.GRPCController.service, {
  Shutdown: (_, callback) => {
    callback(null, {});
    setTimeout(() => process.exit(0), 10);
  },
});

// go-plugin's AutoMTLS: the host's certificate comes in PLUGIN_CLIENT_CERT;
// the adapter serves TLS, requiring it, and sends its own certificate back
// in the handshake line (DER, base64 without padding).
const clientCert = process.env.PLUGIN_CLIENT_CERT;
let creds = grpc.ServerCredentials.createInsecure();
let certField = '';
if (clientCert) {
  const cert = fs.readFileSync(path.join(here, 'cert.pem'));
  const key = fs.readFileSync(path.join(here, 'key.pem'));
  creds = grpc.ServerCredentials.createSsl(Buffer.from(clientCert), [{ cert_chain: cert, private_key: key }], true);
  certField = '|' + new crypto.X509Certificate(cert).raw.toString('base64').replace(/=+$/, '');
}
server.bindAsync('127.0.0.1:0', creds, (err, port) => {
  if (err) {
    console.error(`listening: ${err.message}`);
    process.exit(1);
  }
  process.stdout.write(`${coreProtocol}|${appProtocol}|tcp|127.0.0.1:${port}|grpc${certField}\n`);
});
