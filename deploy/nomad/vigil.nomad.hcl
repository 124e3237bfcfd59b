# vigil beside a vLLM engine under Nomad: one allocation is one worker.
#
# The drain: vigil is stopped with --grace-period 30s and --shutdown-delay
# 5s, so it exits within 37s of its signal (the shutdown delay + the grace
# period + 2s; `vigil run --dry-run` prints it as shutdown-budget).
#
# Stop order: on a planned stop Nomad signals both tasks at once, and the
# engine's shutdown_delay holds its signal back for 40s: vigil withdraws the
# worker at once, keeps admitting for the shutdown delay, lets requests in
# flight finish through the engine, which still serves, and exits 0; only
# then is the engine stopped.
#
# Restarts: --on-loss=wait. When the engine is lost vigil withdraws the
# worker, drains, restarts its adapter and waits for the engine (which its
# own restart brings back) and registers it again, without exiting. Exiting
# would spend the restart block on the engine's losses: each costs vigil
# one of its 10 attempts in 30 minutes and a 5s delay (plus Nomad's jitter)
# unregistered, and the 11th fails the allocation (mode = "fail"), the
# engine and its loaded model with it. The block still restarts vigil after
# a failure of its own (exit 1: the engine not back within
# --startup-deadline). Nomad cannot tell exit codes apart: a configuration
# error (exit 78) is restarted too, until `attempts` runs out and the
# allocation fails. Check the arguments first with `vigil run --dry-run`.
#
# Do NOT also register a Nomad `service` for the worker (no `service` block
# in this group): vigil registers it in Consul itself, only while the engine
# serves, and a second registration by Nomad would be listed while vigil
# has withdrawn it.
#
# Nomad clients cap kill_timeout at their max_kill_timeout (30s by
# default): raise it to at least 45s in the client configuration.
job "llm-vllm" {
  type = "service"

  group "worker" {
    count = 1

    network {
      port "engine" {}
      port "grpc" {}
    }

    restart {
      attempts = 10
      interval = "30m"
      delay    = "5s"
      mode     = "fail"
    }

    task "engine" {
      driver = "docker"

      # Longer than vigil's drain (37s): the engine serves until vigil has
      # withdrawn the worker and its requests in flight have finished.
      shutdown_delay = "40s"
      kill_timeout   = "30s"

      config {
        network_mode = "host"
        image        = "vllm/vllm-openai:latest"
        # The engine's own command line: serve its gRPC API on the engine
        # port (see the engine's documentation for its flags).
        args = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--grpc-port", "${NOMAD_PORT_engine}"]
      }

      resources {
        cpu    = 4000
        memory = 32768
      }
    }

    task "vigil" {
      driver = "docker"

      # At least vigil's drain (37s) and a margin: a stop never kills vigil
      # mid-drain.
      kill_timeout = "45s"
      kill_signal  = "SIGTERM"

      config {
        network_mode = "host"
        # Push what `make image` built to a registry the clients pull from:
        # make image IMAGE=REGISTRY/vigil && podman push REGISTRY/vigil:VERSION
        # (VERSION is git describe, as vigil --version prints it).
        image        = "REGISTRY/vigil:VERSION" # its entrypoint is vigil
        # vigil-args:begin
        args = [
          "run",
          "--engine=vllm",
          "--engine-addr=${NOMAD_ADDR_engine}",
          "--discovery=consul",
          "--service-name=llm",
          "--listen=${NOMAD_ADDR_grpc}",
          "--advertise-addr=${NOMAD_HOST_ADDR_grpc}",
          "--grace-period=30s",
          "--shutdown-delay=5s",
          "--on-loss=wait",
          "--log-format=json",
        ]
        # vigil-args:end
      }

      # The worker id defaults to ${NOMAD_ALLOC_ID}-${NOMAD_TASK_NAME}:
      # stable across restarts of the task, unique per allocation.
      env {
        CONSUL_HTTP_ADDR = "${attr.unique.network.ip-address}:8500"
        # The Consul token (service:write on "llm") from a template block,
        # Vault or workload identity, as CONSUL_HTTP_TOKEN.
      }

      resources {
        cpu    = 200
        memory = 128
      }
    }
  }
}
