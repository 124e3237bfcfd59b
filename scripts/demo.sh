#!/usr/bin/env bash
# Runs vigil's main job on the embedded defaults: a vllm-mock engine and
# vigil on the file registry. Shows the worker registered while the engine
# serves, then the engine stopping, vigil withdrawing it and exiting 1.
# Cleans up after itself and exits 0 when vigil behaved as described.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
mock_pid= vigil_pid=
cleanup() {
  [ -n "$vigil_pid" ] && kill "$vigil_pid" 2>/dev/null || true
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# free_port prints a loopback port nothing listens on, from 20000 up
# (below the kernel's range for outgoing connections).
free_port() {
  local p
  for p in $(seq "$1" 20999); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "demo: no free port" >&2; exit 1
}
engine=127.0.0.1:${DEMO_ENGINE_PORT:-$(free_port 20051)}
control=127.0.0.1:${DEMO_CONTROL_PORT:-$(free_port 20151)}
listen=127.0.0.1:${DEMO_LISTEN_PORT:-$(free_port 20251)}
registry=$work/registry
record=$registry/llm/demo-worker.json

say() { printf '\n== %s\n' "$*"; }

# wait_for CMD...: retries CMD for up to 10 s.
wait_for() {
  for _ in $(seq 200); do "$@" && return 0; sleep 0.05; done
  return 1
}

say "starting vllm-mock (engine on $engine, control on $control; it loads for 1s)"
bin/vllm-mock --listen "$engine" --control "$control" --model demo-model --startup-delay 1s \
  >"$work/mock.log" 2>&1 &
mock_pid=$!

say "starting vigil run --engine vllm --discovery file (the defaults)"
bin/vigil run --engine vllm --engine-addr "$engine" --listen "$listen" \
  --registry-dir "$registry" --worker-id demo-worker --grace-period 2s \
  2> >(sed -u 's/^/  vigil | /') &
vigil_pid=$!

wait_for test -f "$record" || { echo "demo: the worker was never registered; vllm-mock said:"; cat "$work/mock.log"; exit 1; }
say "registered: $record"
sed 's/^/  /' "$record"

say "stopping the engine (SIGTERM: vllm-mock reports NOT_SERVING, then exits, as vLLM does)"
kill -TERM "$mock_pid"

code=0
wait "$vigil_pid" || code=$?
vigil_pid=
if [ -f "$record" ]; then echo "demo: the record was not removed"; exit 1; fi
say "record removed; vigil exited with code $code (1: engine lost, so its supervisor restarts it)"
[ "$code" -eq 1 ] || { echo "demo: want exit code 1"; exit 1; }
echo "demo: done"
