// Package adapter holds what vigil knows of the executables it runs as
// engine adapters: where a plugin directory keeps an engine's adapter,
// the SHA-256 pins of a SHA256SUMS file, and the scrubbed environment
// every adapter process (built-in ones too) runs with.
package adapter

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// FilePrefix begins the file name of an engine's adapter in a plugin
// directory: vigil-adapter-<engine>.
const FilePrefix = "vigil-adapter-"

// SumsFile is the file of a plugin directory that pins its adapters, in
// sha256sum's format.
const SumsFile = "SHA256SUMS"

// DefaultDir is the conventional plugin directory, where an image puts its
// third-party adapters; it need not exist.
const DefaultDir = "/usr/local/lib/vigil/plugins"

// InDir returns the path of engine's adapter in dir and whether a file is
// there; a missing directory holds none.
func InDir(dir, engine string) (path string, found bool, err error) {
	path = filepath.Join(dir, FilePrefix+engine)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, false, nil
	case err != nil:
		return path, false, err
	case fi.IsDir():
		return path, false, fmt.Errorf("%s is a directory", path)
	}
	return path, true, nil
}

// Sum is the SHA-256 of the file at path, in lower-case hex.
func Sum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Pins reads dir's SumsFile: the SHA-256 of each file it lists, by file
// name. ok is false when dir has no SumsFile.
func Pins(dir string) (pins map[string]string, ok bool, err error) {
	path := filepath.Join(dir, SumsFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	pins, err = parseSums(f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return pins, true, nil
}

// sumLine is one line of sha256sum's output: the digest, two spaces (or a
// space and the binary-mode star), the file name.
var sumLine = regexp.MustCompile(`^([0-9a-fA-F]{64}) [ *](.+)$`)

// parseSums reads sha256sum's format; blank lines and # comments are
// skipped, and a name listed twice must have one digest.
func parseSums(r io.Reader) (map[string]string, error) {
	pins := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sumLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: want a SHA-256 in hex, two spaces and a file name, as sha256sum prints", n)
		}
		name, sum := strings.TrimPrefix(m[2], "./"), strings.ToLower(m[1])
		if prev, ok := pins[name]; ok && prev != sum {
			return nil, fmt.Errorf("line %d: %s listed again with another SHA-256", n, name)
		}
		pins[name] = sum
	}
	return pins, sc.Err()
}

// passed are the variables of vigil's environment that every adapter
// gets: what a program needs to run (PATH, HOME, TMPDIR) and its locale
// and time zone; LC_* too.
var passed = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "LANG": true, "TZ": true}

// Reserved reports whether name is one of vigil's own variables, never
// given to an adapter: CONSUL_* hold the Consul token and address, VIGIL_*
// vigil's flags.
func Reserved(name string) bool {
	return strings.HasPrefix(name, "CONSUL_") || strings.HasPrefix(name, "VIGIL_")
}

// Env is an adapter process's environment taken from environ (KEY=VALUE
// entries): the variables every adapter gets, and those named in extra,
// but never a Reserved one. go-plugin adds its own.
func Env(environ, extra []string) []string {
	named := map[string]bool{}
	for _, n := range extra {
		named[n] = true
	}
	env := []string{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if (passed[name] || strings.HasPrefix(name, "LC_") || named[name]) && !Reserved(name) {
			env = append(env, kv)
		}
	}
	return env
}

// envSocketDir is go-plugin's variable (EnvUnixSocketDir) naming the
// directory an adapter makes its Unix socket in.
const envSocketDir = "PLUGIN_UNIX_SOCKET_DIR"

// SocketDir is the directory an adapter with environment env (KEY=VALUE
// entries) makes its go-plugin Unix socket in, and the variable that
// names it: PLUGIN_UNIX_SOCKET_DIR, else TMPDIR, else /tmp (from "").
func SocketDir(env []string) (dir, from string) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for _, name := range []string{envSocketDir, "TMPDIR"} {
		if vars[name] != "" {
			return vars[name], name
		}
	}
	return "/tmp", ""
}

// CheckWritable returns an error unless a file can be made in dir: it
// makes one and removes it.
func CheckWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".vigil-check-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}
