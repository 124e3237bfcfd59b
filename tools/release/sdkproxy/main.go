// Command sdkproxy writes a Go module into a file GOPROXY directory, laid
// out as the module proxy serves it ($dir/<module>/@v/{list,V.info,V.mod,
// V.zip}), so that a build fetches it as an outside author's would, with
// GOPROXY=file://$dir,<the usual proxy>. `make example` serves the working
// tree's sdk from it, and `make sdk-api` the last sdk/v* tag, gorelease's
// base. It prints the version it wrote.
//
//	sdkproxy -out DIR -dir sdk [-after vX.Y.Z]
//
// writes the module in directory sdk at a pseudo-version derived from its
// files' content (vX.Y.(Z+1)-0.<fixed time>-<hash>, or v0.0.0-<fixed
// time>-<hash> with no -after): a changed module is never served under an
// old version, and an unchanged one keeps its version (and its place in the
// module cache).
//
//	sdkproxy -out DIR -repo . -tag sdk/vX.Y.Z
//
// writes the module in the tag's directory (sdk) as the tag holds it, at
// vX.Y.Z, as the proxy would serve that release.
package main

import (
	"archive/zip"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	modzip "golang.org/x/mod/zip"
)

// pseudoTime is every content pseudo-version's time: the version names the
// content, not when it was made, so the same files give the same version.
var pseudoTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	out := flag.String("out", "", "file GOPROXY directory to write into (created if need be)")
	dir := flag.String("dir", "", "module directory to serve at a content pseudo-version")
	after := flag.String("after", "", "with -dir: the last release, which the pseudo-version follows")
	repo := flag.String("repo", "", "git repository whose -tag to serve")
	tag := flag.String("tag", "", "with -repo: the tag <dir>/vX.Y.Z to serve, at vX.Y.Z")
	modPath := flag.String("module", "github.com/vigilhq/vigil/sdk", "with -repo: the module path")
	flag.Parse()
	var (
		v   string
		err error
	)
	switch {
	case *out == "" || flag.NArg() > 0:
		err = errors.New("usage: sdkproxy -out DIR {-dir DIR [-after vX.Y.Z] | -repo DIR -tag PREFIX/vX.Y.Z}")
	case *dir != "" && *repo == "":
		v, err = fromDir(*out, *dir, *after)
	case *repo != "" && *dir == "":
		v, err = fromTag(*out, *repo, *tag, *modPath)
	default:
		err = errors.New("give one of -dir and -repo")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdkproxy:", err)
		os.Exit(1)
	}
	fmt.Println(v)
}

// fromDir writes the module in dir at its content pseudo-version.
func fromDir(out, dir, after string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	modPath := modfile.ModulePath(data)
	if modPath == "" {
		return "", fmt.Errorf("%s/go.mod has no module directive", dir)
	}
	if after != "" && !semver.IsValid(after) {
		return "", fmt.Errorf("-after %q: want a semantic version vX.Y.Z", after)
	}
	// The hash is of the zip at a fixed version: a zip's file names hold
	// its version, so the real one cannot name itself.
	hash, err := hashZip(func(w io.Writer) error {
		return modzip.CreateFromDir(w, module.Version{Path: modPath, Version: "v0.0.0"}, dir)
	})
	if err != nil {
		return "", err
	}
	m := module.Version{Path: modPath, Version: module.PseudoVersion(semver.Major(after), after, pseudoTime, hash)}
	return m.Version, write(out, m, func(w io.Writer) error { return modzip.CreateFromDir(w, m, dir) })
}

// fromTag writes the module as tag (<subdir>/vX.Y.Z) holds it.
func fromTag(out, repo, tag, modPath string) (string, error) {
	i := strings.LastIndex(tag, "/")
	subdir, v := tag[:max(i, 0)], tag[i+1:]
	if i < 0 || !semver.IsValid(v) || semver.Canonical(v) != v {
		return "", fmt.Errorf("-tag %q: want <module directory>/vX.Y.Z", tag)
	}
	m := module.Version{Path: modPath, Version: v}
	return v, write(out, m, func(w io.Writer) error { return modzip.CreateFromVCS(w, m, repo, tag, subdir) })
}

// hashZip is the first 12 hex digits of the go.sum hash (h1:) of the zip
// that create writes.
func hashZip(create func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp("", "sdkproxy-*.zip")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	err = errors.Join(create(f), f.Close())
	if err != nil {
		return "", err
	}
	h1, err := dirhash.HashZip(f.Name(), dirhash.Hash1)
	if err != nil {
		return "", err
	}
	sum, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h1, "h1:"))
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum)[:12], nil
}

// write puts m's zip (from create), go.mod and info into out's layout, and
// lists out's releases.
func write(out string, m module.Version, create func(io.Writer) error) error {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ev, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	zipPath := filepath.Join(dir, ev+".zip")
	f, err := os.Create(zipPath)
	if err != nil {
		return err
	}
	if err := errors.Join(create(f), f.Close()); err != nil {
		return fmt.Errorf("zipping %s: %w", m, err)
	}
	goMod, err := readZipFile(zipPath, m.Path+"@"+m.Version+"/go.mod")
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, pseudoTime})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ev+".mod"), goMod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ev+".info"), info, 0o644); err != nil {
		return err
	}
	return writeList(dir)
}

// writeList writes dir's list: its releases, not its pseudo-versions (as
// the proxy protocol says).
func writeList(dir string) error {
	infos, err := filepath.Glob(filepath.Join(dir, "*.info"))
	if err != nil {
		return err
	}
	var versions []string
	for _, p := range infos {
		v, err := module.UnescapeVersion(strings.TrimSuffix(filepath.Base(p), ".info"))
		if err == nil && !module.IsPseudoVersion(v) {
			versions = append(versions, v)
		}
	}
	semver.Sort(versions)
	var list strings.Builder
	for _, v := range slices.Compact(versions) {
		list.WriteString(v + "\n")
	}
	return os.WriteFile(filepath.Join(dir, "list"), []byte(list.String()), 0o644)
}

// readZipFile returns the contents of the file name in the zip at zipPath.
func readZipFile(zipPath, name string) ([]byte, error) {
	r, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	for _, f := range r.File {
		if path.Clean(f.Name) != name {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	return nil, fmt.Errorf("%s has no %s", zipPath, name)
}
