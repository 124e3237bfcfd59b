package enginemock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// testCommand is a mock command with one engine flag, --mode, which New
// rejects unless it is "ok".
func testCommand() Command {
	return Command{
		Name:   "test-mock",
		Serves: "test.Service",
		Flags:  []Flag{{&cli.StringFlag{Name: "mode", Value: "ok"}, "ok only"}},
		New: func(c *cli.Context, cfg Config) (*Engine, []any, error) {
			if m := c.String("mode"); m != "ok" {
				return nil, nil, &BadFlag{Name: "mode", Value: m}
			}
			return New(cfg), []any{"mode", c.String("mode")}, nil
		},
	}
}

// lines is a log destination handing each line over as it is written.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// waitLine returns the first line with msg=msg, failing after a while.
func (l lines) waitLine(t *testing.T, msg string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-l:
			if strings.Contains(line, "msg="+msg+" ") || strings.HasSuffix(line, "msg="+msg+"\n") {
				return line
			}
		case <-timeout:
			t.Fatalf("no %q log line", msg)
		}
	}
}

// runCommand runs cmd with args (listening on fresh loopback ports) until
// ctx ends it or it ends itself, and returns its log lines and result.
func runCommand(ctx context.Context, cmd Command, args ...string) (lines, <-chan error) {
	log := make(lines, 100)
	done := make(chan error, 1)
	args = append([]string{cmd.Name, "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0"}, args...)
	go func() { done <- cmd.App(slog.New(slog.NewTextHandler(log, nil))).RunContext(ctx, args) }()
	return log, done
}

// The tests that run a Command's app are not parallel: urfave/cli's App.Run
// writes to its package-level help flag, so two apps running at once race.
func TestCommandBadInput(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string // the message, in full or up to "; "
	}{
		"negative startup delay":        {[]string{"--startup-delay", "-1s"}, `invalid value "-1s" for --startup-delay: want a non-negative Go duration such as 0s, 500ms or 2m`},
		"negative token delay":          {[]string{"--token-delay", "-1ms"}, `invalid value "-1ms" for --token-delay: want a non-negative Go duration such as 0s, 10ms or 1s`},
		"token delay not duration":      {[]string{"--token-delay", "x"}, `--token-delay accepts a non-negative Go duration such as 0s, 10ms or 1s`},
		"negative step interval":        {[]string{"--step-interval", "-1ms"}, `invalid value "-1ms" for --step-interval: want a non-negative Go duration such as 0s, 10ms or 30ms`},
		"zero tokens per message":       {[]string{"--tokens-per-message", "0"}, `invalid value "0" for --tokens-per-message: want an integer from 1`},
		"negative max connection age":   {[]string{"--max-connection-age", "-1s"}, `invalid value "-1s" for --max-connection-age: want a non-negative Go duration such as 0s, 300ms or 5m`},
		"zero max connection age grace": {[]string{"--max-connection-age-grace", "0s"}, `invalid value "0s" for --max-connection-age-grace: want a positive Go duration such as 300ms or 1s`},
		"engine flag":                   {[]string{"--mode", "bad"}, `invalid value "bad" for --mode: want ok only`},
		"argument":                      {[]string{"extra"}, `unexpected argument "extra"; test-mock takes flags only`},
		"unknown flag":                  {[]string{"--nope"}, `flag provided but not defined: -nope; see --help`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, done := runCommand(t.Context(), testCommand(), tt.args...)
			err := <-done
			if code := exitCode(err); code != exitBadFlag || !strings.HasSuffix(err.Error(), tt.want) {
				t.Errorf("error %v, exit %d; want exit %d and a message ending %q", err, code, exitBadFlag, tt.want)
			}
		})
	}
}

func TestCommandListenInUse(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, done := runCommand(t.Context(), testCommand(), "--control", lis.Addr().String())
	if err := <-done; exitCode(err) != 1 || !strings.Contains(err.Error(), "--control") {
		t.Errorf("error %v, exit %d; want exit 1 naming --control", err, exitCode(err))
	}
}

var controlAddr = regexp.MustCompile(`control=(\S+)`)

// TestCommandStop: the command logs "listening" with the engine's own
// attributes and "serving" once ready, and exits 0 after POST /stop.
func TestCommandStop(t *testing.T) {
	log, done := runCommand(t.Context(), testCommand(), "--model", "m", "--instance-id", "abc", "--startup-delay", "50ms")
	line := log.waitLine(t, "listening")
	for _, want := range []string{"model=m", "instance_id=abc", "mode=ok", "grpc=127.0.0.1:"} {
		if !strings.Contains(line, want) {
			t.Errorf("listening line %q lacks %q", line, want)
		}
	}
	log.waitLine(t, "serving")
	resp, err := http.Post("http://"+controlAddr.FindStringSubmatch(line)[1]+"/stop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /stop = %d, want 200", resp.StatusCode)
	}
	if err := <-done; err != nil {
		t.Errorf("command = %v, want nil (exit 0)", err)
	}
	log.waitLine(t, "stopped")
}

// TestCommandSignal: the end of the command's context stands in for
// SIGTERM; the command stops the engine and exits 0.
func TestCommandSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	log, done := runCommand(ctx, testCommand())
	log.waitLine(t, "serving")
	cancel()
	if line := log.waitLine(t, "stopping"); !strings.Contains(line, "reason=signal") {
		t.Errorf("stopping line %q, want reason=signal", line)
	}
	if err := <-done; err != nil {
		t.Errorf("command = %v, want nil (exit 0)", err)
	}
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	if got := exitCode(errors.New("x")); got != 1 {
		t.Errorf("exitCode(plain error) = %d, want 1", got)
	}
	if got := exitCode(cli.Exit("x", 2)); got != 2 {
		t.Errorf("exitCode(cli.Exit 2) = %d, want 2", got)
	}
}
