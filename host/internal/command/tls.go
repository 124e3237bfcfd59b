package command

import (
	"crypto/tls"
	"log"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
	"github.com/vigilhq/vigil/host/internal/tlsconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// tlsFlags are the TLS flags of a command's listeners; what names them in
// the usage ("the worker endpoint", "both listeners").
func tlsFlags(what string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-cert-file", EnvVars: env("TLS_CERT_FILE"),
			Usage: "PEM certificate (its chain after it) that " + what + " serve TLS with; reloaded when the file changes (default: plaintext)"},
		&cli.StringFlag{Name: "tls-key-file", EnvVars: env("TLS_KEY_FILE"),
			Usage: "PEM private key of --tls-cert-file; reloaded with it"},
		&cli.StringFlag{Name: "tls-client-ca-file", EnvVars: env("TLS_CLIENT_CA_FILE"),
			Usage: "PEM CA certificates for mTLS: clients of " + what + " must present a certificate one of them signed; reloaded when the file changes"},
	}
}

// parseTLS validates tlsFlags' combination; the files are read by load.
func parseTLS(c *cli.Context) (tlsconfig.ServerFiles, error) {
	f := tlsconfig.ServerFiles{CertFile: c.String("tls-cert-file"), KeyFile: c.String("tls-key-file"), ClientCAFile: c.String("tls-client-ca-file")}
	switch {
	case f.CertFile != "" && f.KeyFile == "":
		return f, usageErrorf("--tls-cert-file %q: needs --tls-key-file, its private key", f.CertFile)
	case f.CertFile == "" && f.KeyFile != "":
		return f, usageErrorf("--tls-key-file %q: needs --tls-cert-file, its certificate", f.KeyFile)
	case f.CertFile == "" && f.ClientCAFile != "":
		return f, usageErrorf("--tls-client-ca-file %q: needs --tls-cert-file and --tls-key-file (mTLS is TLS with client certificates)", f.ClientCAFile)
	}
	return f, nil
}

// loadServerTLS reads the listener TLS files; nil when TLS is off. An
// unreadable or invalid file is a configuration error naming its flag.
func loadServerTLS(f tlsconfig.ServerFiles, log hclog.Logger) (*tlsconfig.Server, error) {
	if f.CertFile == "" {
		return nil, nil
	}
	if err := readable("tls-cert-file", f.CertFile, "tls-key-file", f.KeyFile, "tls-client-ca-file", f.ClientCAFile); err != nil {
		return nil, err
	}
	s, err := tlsconfig.NewServer(f, log.Named("tls"))
	if err != nil {
		flags := "--tls-cert-file, --tls-key-file"
		if f.ClientCAFile != "" {
			flags += ", --tls-client-ca-file"
		}
		return nil, usageErrorf("%s: %v", flags, err)
	}
	return s, nil
}

// grpcCreds is the gRPC server option of s, which logs refused
// handshakes; none when s is nil.
func grpcCreds(s *tlsconfig.Server) []grpc.ServerOption {
	if s == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(s.Credentials())}
}

// workerTLSFlags are route's flags for its connections to workers.
func workerTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "worker-tls", EnvVars: env("WORKER_TLS"),
			Usage: "connect to workers with TLS (their vigil run --tls-cert-file), verified against --worker-ca-file or the system's CAs"},
		&cli.StringFlag{Name: "worker-ca-file", EnvVars: env("WORKER_CA_FILE"),
			Usage: "PEM CA certificates that sign the workers' certificates (with --worker-tls; default: the system's); reloaded when the file changes"},
		&cli.StringFlag{Name: "worker-server-name", EnvVars: env("WORKER_SERVER_NAME"),
			Usage: "name the workers' certificates are verified against in place of their discovered address, for certificates without IP SANs (with --worker-tls)"},
		&cli.StringFlag{Name: "worker-cert-file", EnvVars: env("WORKER_CERT_FILE"),
			Usage: "PEM client certificate presented to workers that require one (their --tls-client-ca-file; with --worker-tls); reloaded when the file changes"},
		&cli.StringFlag{Name: "worker-key-file", EnvVars: env("WORKER_KEY_FILE"),
			Usage: "PEM private key of --worker-cert-file"},
	}
}

// parseWorkerTLS validates workerTLSFlags' combination; nil when
// --worker-tls is off.
func parseWorkerTLS(c *cli.Context) (*tlsconfig.ClientFiles, error) {
	f := tlsconfig.ClientFiles{CAFile: c.String("worker-ca-file"), ServerName: c.String("worker-server-name"),
		CertFile: c.String("worker-cert-file"), KeyFile: c.String("worker-key-file")}
	if !c.Bool("worker-tls") {
		for _, flag := range []string{"worker-ca-file", "worker-server-name", "worker-cert-file", "worker-key-file"} {
			if c.String(flag) != "" {
				return nil, usageErrorf("--%s %q: needs --worker-tls", flag, c.String(flag))
			}
		}
		return nil, nil
	}
	switch {
	case f.CertFile != "" && f.KeyFile == "":
		return nil, usageErrorf("--worker-cert-file %q: needs --worker-key-file, its private key", f.CertFile)
	case f.CertFile == "" && f.KeyFile != "":
		return nil, usageErrorf("--worker-key-file %q: needs --worker-cert-file, its certificate", f.KeyFile)
	}
	return &f, nil
}

// loadWorkerTLS reads the worker TLS files into gRPC credentials, which
// reload them; nil when f is.
func loadWorkerTLS(f *tlsconfig.ClientFiles, log hclog.Logger) (credentials.TransportCredentials, error) {
	if f == nil {
		return nil, nil
	}
	if err := readable("worker-ca-file", f.CAFile, "worker-cert-file", f.CertFile, "worker-key-file", f.KeyFile); err != nil {
		return nil, err
	}
	c, err := tlsconfig.NewClient(*f, log.Named("tls"))
	if err != nil {
		return nil, usageErrorf("--worker-ca-file, --worker-cert-file, --worker-key-file: %v", err)
	}
	return c.Credentials(), nil
}

// apiKeyFlags are route's flags for the HTTP API's key.
func apiKeyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api-key", EnvVars: env("API_KEY"),
			Usage: "key the HTTP API requires as a Bearer token (Authorization: Bearer KEY), as vLLM's --api-key; GET /health stays open (default: none required)"},
		&cli.StringFlag{Name: "api-key-file", EnvVars: env("API_KEY_FILE"),
			Usage: "file holding --api-key (white space at its ends trimmed), which keeps the key out of the process list; read at start"},
	}
}

// parseAPIKey validates the API key flags' combination; the file is read
// by loadAPIKey.
func parseAPIKey(c *cli.Context) (key, file string, err error) {
	key, file = c.String("api-key"), c.String("api-key-file")
	switch {
	case c.IsSet("api-key") && c.IsSet("api-key-file"):
		return "", "", usageErrorf("--api-key and --api-key-file: give one")
	case c.IsSet("api-key") && strings.TrimSpace(key) == "":
		return "", "", usageErrorf("--api-key: must not be empty or blank; leave it unset to require no key")
	}
	return strings.TrimSpace(key), file, nil
}

// loadAPIKey returns the key: key, or file's content.
func loadAPIKey(key, file string) (string, error) {
	if file == "" {
		return key, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", usageErrorf("--api-key-file %q: %v", file, err)
	}
	if key = strings.TrimSpace(string(data)); key == "" {
		return "", usageErrorf("--api-key-file %q: the file is empty; write the key in it", file)
	}
	return key, nil
}

// readable checks that each file named by a flag (pairs of flag and path;
// "" skipped) can be read, for an error naming the flag.
func readable(flagPaths ...string) error {
	for i := 0; i+1 < len(flagPaths); i += 2 {
		flag, path := flagPaths[i], flagPaths[i+1]
		if path == "" {
			continue
		}
		if _, err := os.ReadFile(path); err != nil {
			return usageErrorf("--%s %q: %v", flag, path, err)
		}
	}
	return nil
}

// httpErrorLog is the HTTP server's ErrorLog: s's, which logs refused
// handshakes as the gRPC listener's credentials do; nil without TLS.
func httpErrorLog(s *tlsconfig.Server, logger hclog.Logger) *log.Logger {
	if s == nil {
		return nil
	}
	return s.ErrorLog(logger.Named("http"))
}

// httpTLS is the HTTP API's TLS config over s, offering HTTP/2
// and HTTP/1.1.
func httpTLS(s *tlsconfig.Server) *tls.Config { return s.Config("h2", "http/1.1") }
