package command

import (
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/host/internal/discovery"
	"github.com/vigilhq/vigil/host/internal/discovery/consul"
	"github.com/vigilhq/vigil/host/internal/discovery/file"
)

// backend is the discovery mechanism that --discovery names, both halves:
// run publishes through its registry, route follows its discoverer.
type backend struct {
	registry   func(ttl, deregisterAfter time.Duration) discovery.Registry
	discoverer func(log hclog.Logger) discovery.Discoverer
}

// newBackend builds the backend d names. run and route both call it, so
// they cannot disagree on what --discovery means; the Consul one honours
// CONSUL_HTTP_ADDR and the other standard variables.
func newBackend(d discoveryConfig) (backend, error) {
	switch d.discovery {
	case "consul":
		if err := checkConsulEnv(); err != nil {
			return backend{}, err
		}
		conf := api.DefaultConfig()
		// The router's blocking queries carry every worker on each change
		// (megabytes at 1,000 workers): compressing them costs Consul more
		// CPU, and the router more time, than the bytes cost on the
		// loopback or LAN to an agent.
		conf.Transport.DisableCompression = true
		client, err := api.NewClient(conf)
		if err != nil {
			return backend{}, usageErrorf("--discovery consul: %v", err)
		}
		return backend{
			registry: func(ttl, deregisterAfter time.Duration) discovery.Registry {
				// CONSUL_HTTP_TOKEN_FILE is read again after a refusal.
				return consul.New(client, conf.Address, consul.Options{TTL: ttl, DeregisterAfter: deregisterAfter, TokenFile: conf.TokenFile})
			},
			discoverer: func(log hclog.Logger) discovery.Discoverer {
				return consul.NewDiscoverer(client.Raw(), d.service, log).Sharded().WithTokenFile(conf.TokenFile)
			},
		}, nil
	default:
		return backend{
			registry: func(ttl, _ time.Duration) discovery.Registry { return file.New(d.registryDir, ttl) },
			discoverer: func(log hclog.Logger) discovery.Discoverer {
				return file.NewDiscoverer(d.registryDir, d.service, log)
			},
		}, nil
	}
}

// newRegistry is run's half of its backend.
func newRegistry(cfg runConfig) (discovery.Registry, error) {
	b, err := newBackend(cfg.discoveryConfig)
	if err != nil {
		return nil, err
	}
	return b.registry(cfg.ttl, cfg.deregAft), nil
}
