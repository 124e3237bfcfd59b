package adapter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vigil-adapter-toy"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "vigil-adapter-dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, engine string
		found, err        bool
	}{
		{"present", dir, "toy", true, false},
		{"absent", dir, "other", false, false},
		{"missing directory", filepath.Join(dir, "nope"), "toy", false, false},
		{"a directory", dir, "dir", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, found, err := InDir(tc.dir, tc.engine)
			if path != filepath.Join(tc.dir, "vigil-adapter-"+tc.engine) {
				t.Errorf("path = %q, want %s/vigil-adapter-%s", path, tc.dir, tc.engine)
			}
			if found != tc.found || (err != nil) != tc.err {
				t.Errorf("InDir() = %v, %v; want found %v, error %v", found, err, tc.found, tc.err)
			}
		})
	}
}

func TestSum(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	// sha256sum of "abc", FIPS 180-2's example.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got, err := Sum(path); got != want || err != nil {
		t.Errorf("Sum() = %q, %v; want %q, nil", got, err, want)
	}
	if _, err := Sum(path + ".missing"); err == nil {
		t.Error("Sum() of a missing file succeeded")
	}
}

func TestParseSums(t *testing.T) {
	t.Parallel()
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		err      string
	}{
		{"empty", "", map[string]string{}, ""},
		{"text and binary mode", a + "  vigil-adapter-toy\n" + b + " *vigil-adapter-big\n",
			map[string]string{"vigil-adapter-toy": a, "vigil-adapter-big": strings.ToLower(b)}, ""},
		{"comments, blanks, ./", "# pins\n\n" + a + "  ./vigil-adapter-toy\n", map[string]string{"vigil-adapter-toy": a}, ""},
		{"listed twice alike", a + "  x\n" + a + "  x\n", map[string]string{"x": a}, ""},
		{"listed twice apart", a + "  x\n" + b + "  x\n", nil, "line 2: x listed again"},
		{"short digest", "abc  x\n", nil, "line 1: want a SHA-256"},
		{"one space", a + " x\n", nil, "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseSums(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseSums() error = %v, want one holding %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseSums() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, ok, err := Pins(dir); ok || err != nil {
		t.Errorf("Pins() of a directory without %s = %v, %v; want false, nil", SumsFile, ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SumsFile), []byte("nonsense\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Pins(dir); err == nil || !strings.Contains(err.Error(), SumsFile) {
		t.Errorf("Pins() of a malformed file: error = %v, want one naming %s", err, SumsFile)
	}
}

// An adapter gets what a program needs and what the operator names, never
// vigil's own variables, whatever is asked.
func TestEnv(t *testing.T) {
	t.Parallel()
	environ := []string{"PATH=/bin", "HOME=/root", "TMPDIR=/tmp", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC",
		"CONSUL_HTTP_TOKEN=secret", "CONSUL_HTTP_ADDR=x", "VIGIL_ENGINE=vllm", "AWS_SECRET_ACCESS_KEY=s",
		"HF_TOKEN=t", "PLUGIN_MIN_PORT=1", "EMPTY="}
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"basics", nil, []string{"PATH=/bin", "HOME=/root", "TMPDIR=/tmp", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC"}},
		{"named", []string{"HF_TOKEN", "EMPTY", "UNSET"},
			[]string{"PATH=/bin", "HOME=/root", "TMPDIR=/tmp", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "HF_TOKEN=t", "EMPTY="}},
		{"reserved asked for", []string{"CONSUL_HTTP_TOKEN", "VIGIL_ENGINE"},
			[]string{"PATH=/bin", "HOME=/root", "TMPDIR=/tmp", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC"}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := environ
			if tc.want == nil {
				in = nil
				tc.want = []string{}
			}
			if diff := cmp.Diff(tc.want, Env(in, tc.extra)); diff != "" {
				t.Errorf("Env() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The adapter's go-plugin socket goes where go-plugin puts it: its own
// variable first (passed with --plugin-env), then TMPDIR, then /tmp.
func TestSocketDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		env       []string
		dir, from string
	}{
		{"nothing set", []string{"PATH=/bin"}, "/tmp", ""},
		{"nil", nil, "/tmp", ""},
		{"TMPDIR", []string{"TMPDIR=/var/tmp"}, "/var/tmp", "TMPDIR"},
		{"empty TMPDIR", []string{"TMPDIR="}, "/tmp", ""},
		{"go-plugin's variable first", []string{"TMPDIR=/var/tmp", "PLUGIN_UNIX_SOCKET_DIR=/run/vigil"}, "/run/vigil", "PLUGIN_UNIX_SOCKET_DIR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, from := SocketDir(tc.env)
			if dir != tc.dir || from != tc.from {
				t.Errorf("SocketDir(%q) = %q, %q; want %q, %q", tc.env, dir, from, tc.dir, tc.from)
			}
		})
	}
}

func TestCheckWritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := CheckWritable(dir); err != nil {
		t.Errorf("CheckWritable(a fresh directory) = %v, want nil", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("CheckWritable left %d files behind", len(entries))
	}
	if err := CheckWritable(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckWritable(a missing directory) = %v, want fs.ErrNotExist", err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		if err := CheckWritable(ro); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("CheckWritable(a read-only directory) = %v, want fs.ErrPermission", err)
		}
	}
}
