package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
)

// readmeMaxLines bounds the README: a front door, the manual in docs/.
const readmeMaxLines = 160

// readmePrep is the run-and-route section's first block: what the test
// provides itself (TestMain's binaries, the fixture tokenizers).
const readmePrep = "make build tokenizer-models\n"

// readmeExamplePorts is how many consecutive ports from $PORT the
// run-and-route example listens on.
const readmeExamplePorts = 5

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of doc's section under heading (a whole line, such
// as "## Failure modes") up to the next heading of its level or above,
// outside code blocks.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	_, sec, ok := strings.Cut(readFile(t, doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", doc, heading)
	}
	level := strings.IndexByte(heading, ' ')
	lines := strings.SplitAfter(sec, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if n := len(line) - len(strings.TrimLeft(line, "#")); !fenced && n > 0 && n <= level && strings.HasPrefix(line[n:], " ") {
			return strings.Join(lines[:i], "")
		}
	}
	return sec
}

// shellBlocks are the contents of the ```sh blocks of text, in order.
func shellBlocks(text string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```$").FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestREADMEIsAFrontDoor: the README stays short; the manual is in docs/.
func TestREADMEIsAFrontDoor(t *testing.T) {
	t.Parallel()
	readme := readFile(t, "../README.md")
	if n := strings.Count(readme, "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move the detail into docs/", n, readmeMaxLines)
	}
	if first := shellBlocks(readme); len(first) == 0 || !strings.HasPrefix(first[0], "make demo ") ||
		!strings.Contains(first[0], "\nmake test ") {
		t.Error("README.md's first block is not make demo, then make test")
	}
}

// TestREADMERunAndRoute runs the README's run-and-route example with bash,
// as written: a mock engine, vigil run with a real tokenizer, vigil route,
// a completion and a chat completion through the router, then everything
// stopped. The block may leave no process behind.
func TestREADMERunAndRoute(t *testing.T) {
	skipShort(t)
	blocks := shellBlocks(section(t, "../README.md", "## Run and route"))
	if len(blocks) < 2 || blocks[0] != readmePrep {
		t.Fatalf("README's run-and-route section: want a block %q (what this test provides), then the example; got %q", readmePrep, blocks)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl not installed: the README's example uses it")
	}
	script := strings.Join(blocks[1:], "")
	for _, m := range regexp.MustCompile(`host/internal/tokenizer/testdata/models/([a-z0-9]+)`).FindAllStringSubmatch(script, -1) {
		fixtureTokenizer(t, m[1])
	}
	dir := exampleRoot(t)
	stdout, stderr := runExample(t, dir, script)
	answers := decodeAnswers(t, stdout, stderr)
	var chat *exampleAnswer
	for i := range answers {
		if answers[i].Object == "chat.completion" {
			chat = &answers[i]
		}
	}
	if chat == nil || len(chat.Choices) == 0 || chat.Choices[0].Message == nil || chat.Choices[0].Message.Role != "assistant" {
		t.Fatalf("the example printed no chat completion with choices[0].message from the assistant:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if len(answers) < 2 || answers[0].Object != "text_completion" || len(answers[0].Choices) == 0 {
		t.Errorf("the example's first answer is not a text completion with a choice:\n%s", stdout)
	}
}

// exampleAnswer is what the test reads of an OpenAI answer.
type exampleAnswer struct {
	Object  string `json:"object"`
	Choices []struct {
		Text    *string `json:"text"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// decodeAnswers reads the JSON answers the example's curls printed, one
// after another; an error answer fails the test.
func decodeAnswers(t *testing.T, stdout, stderr string) []exampleAnswer {
	t.Helper()
	var out []exampleAnswer
	dec := json.NewDecoder(strings.NewReader(stdout))
	for {
		var a exampleAnswer
		err := dec.Decode(&a)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the example's output is not JSON answers: %v\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if a.Error != nil {
			t.Errorf("the example got an error answer: %s", a.Error)
		}
		out = append(out, a)
	}
}

// exampleRoot is a directory laid out as the repository after make build
// tokenizer-models, for the example's relative paths: bin/ holds TestMain's
// vigil and mock engines, and the tokenizer models are the repository's.
func exampleRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	models, err := filepath.Abs(filepath.Join("..", "host", "internal", "tokenizer", "testdata", "models"))
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{filepath.Join(bin, "vigil"): vigilBin,
		filepath.Join(dir, "host", "internal", "tokenizer", "testdata", "models"): models}
	for _, e := range engines {
		links[filepath.Join(bin, e.Mock)] = e.mockBin
	}
	for link, target := range links {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	return dir
}

// runExample runs script with bash -e in dir, in a process group of its
// own, with PORT the first of readmeExamplePorts free ports. It fails the
// test when bash fails or a process of the group outlives it (killing it).
func runExample(t *testing.T, dir, script string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	outF, errF := outputFile(t, dir, "stdout"), outputFile(t, dir, "stderr")
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, outF, errF
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", freePortRun(t, readmeExamplePorts)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { killGroup(pgid) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // bash is not reaped yet
		err = fmt.Errorf("still running after 90s: killed; %w", <-done)
	}
	for f, b := range map[*os.File]*bytes.Buffer{outF: &out, errF: &errOut} {
		if _, rerr := f.Seek(0, io.SeekStart); rerr == nil {
			_, _ = b.ReadFrom(f)
		}
	}
	if err != nil {
		t.Fatalf("the README's example failed: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if left := harness.GroupMembers(pgid); len(left) > 0 {
		t.Errorf("the README's example left processes %v running after its last line:\n%s", left, errOut.String())
	}
	return out.String(), errOut.String()
}

// outputFile is a file in dir for a process's output: a file, not a pipe,
// so that Wait returns when bash exits, whatever its children hold open.
func outputFile(t *testing.T, dir, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// killGroup kills the processes left in process group pgid, but its
// leader, which is reaped once Wait returns (its pid free for reuse).
func killGroup(pgid int) {
	for _, pid := range harness.GroupMembers(pgid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// freePortRun is the first of n consecutive loopback ports that are free.
// The test that asks is not parallel: no other test of the run starts a
// process meanwhile.
func freePortRun(t *testing.T, n int) int {
	t.Helper()
next:
	for range 100 {
		p := freePort(t)
		for q := p + 1; q < p+n; q++ {
			l, err := net.Listen("tcp", addr(q))
			if err != nil {
				continue next
			}
			l.Close()
		}
		return p
	}
	t.Fatalf("no %d consecutive free loopback ports", n)
	return 0
}
