package command

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// checkConsulEnv refuses the Consul client's variables that consul/api
// would take silently: a CONSUL_HTTP_SSL or CONSUL_HTTP_SSL_VERIFY that is
// no boolean (logged once and read as false), and a CONSUL_HTTP_ADDR that
// is no address (every call then fails, retried for good).
func checkConsulEnv() error {
	for _, name := range []string{"CONSUL_HTTP_SSL", "CONSUL_HTTP_SSL_VERIFY"} {
		if v := os.Getenv(name); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				return usageErrorf("%s=%q: want true or false", name, v)
			}
		}
	}
	if v := os.Getenv("CONSUL_HTTP_ADDR"); v != "" {
		if err := checkConsulAddr(v); err != nil {
			return usageErrorf("CONSUL_HTTP_ADDR=%q: %v; want host:port, such as 127.0.0.1:8500, optionally after http:// or https://, or unix://<socket path>", v, err)
		}
	}
	return nil
}

// checkConsulAddr checks an agent address as consul/api reads it: an
// optional scheme, then host[:port] or, for unix://, a socket path.
func checkConsulAddr(addr string) error {
	if scheme, rest, ok := strings.Cut(addr, "://"); ok {
		switch scheme {
		case "unix":
			if rest == "" {
				return fmt.Errorf("no socket path")
			}
			return nil
		case "http", "https":
			addr = rest
		default:
			return fmt.Errorf("scheme %q", scheme)
		}
	}
	u, err := url.Parse("http://" + addr)
	if err != nil || u.Host != addr || u.Hostname() == "" {
		return fmt.Errorf("not a host[:port]")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want a number from 1 to 65535", p)
		}
	}
	return nil
}
