package logwriter

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// output is a log output that the test can stall: while held, a Write
// blocks until release. It keeps what it took and says when it took it.
type output struct {
	mu      sync.Mutex
	lines   []string
	took    chan struct{} // closed and replaced on every write taken
	held    chan struct{} // nil: writes pass; else closed by release
	blocked chan struct{} // gets a value when a write blocks on held
	err     error         // returned by every write: a broken output
	delay   time.Duration // each write takes this long: a slow output
}

func newOutput() *output {
	return &output{took: make(chan struct{}), blocked: make(chan struct{}, 1)}
}

func (o *output) hold() { o.mu.Lock(); o.held = make(chan struct{}); o.mu.Unlock() }

func (o *output) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held != nil {
		close(o.held)
		o.held = nil
	}
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	held := o.held
	o.mu.Unlock()
	if held != nil {
		o.blocked <- struct{}{}
		<-held
	}
	time.Sleep(o.delay)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	o.lines = append(o.lines, string(p))
	close(o.took)
	o.took = make(chan struct{})
	return len(p), nil
}

// waitFor waits until the output has taken n entries.
func (o *output) waitFor(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		o.mu.Lock()
		got, took := len(o.lines), o.took
		o.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-took:
		case <-timeout:
			t.Fatalf("the output took %d entries, want %d", got, n)
		}
	}
}

func (o *output) got() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lines...)
}

// entry is a 4-byte log entry.
func entry(i int) string { return fmt.Sprintf("e%d\n", i%100) }

func notice(n int) []byte { return fmt.Appendf(nil, "dropped=%d\n", n) }

// writeNow writes s and fails the test when the Write blocks or fails.
func writeNow(t *testing.T, w *Writer, s string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { _, err := w.Write([]byte(s)); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Write(%q) = %v, want nil", s, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Write(%q) blocked", s)
	}
}

func TestWritesInOrder(t *testing.T) {
	t.Parallel()
	o := newOutput()
	w := New(o, DefaultMaxQueued)
	var want []string
	for i := range 50 {
		writeNow(t, w, entry(i))
		want = append(want, entry(i))
	}
	w.Close(time.Second)
	if got := o.got(); strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// A stalled output holds up no Write: the queue takes entries up to its
// bound, drops the rest, and once the output takes writes again the count
// of those dropped is written where they went missing.
func TestStalledOutput(t *testing.T) {
	t.Parallel()
	o := newOutput()
	w := New(o, 8) // two entries
	w.SetNotice(notice)
	o.hold()
	writeNow(t, w, entry(1))
	<-o.blocked // the goroutine is stuck writing e1
	for i := 2; i <= 6; i++ {
		writeNow(t, w, entry(i)) // e2 and e3 queued; e4, e5, e6 dropped
	}
	o.release()
	o.waitFor(t, 3)
	writeNow(t, w, entry(7))
	w.Close(time.Second)
	want := []string{entry(1), entry(2), entry(3), "dropped=3\n", entry(7)}
	if got := o.got(); strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// Close writes the count of entries dropped since the last one queued.
func TestCloseReportsDropped(t *testing.T) {
	t.Parallel()
	o := newOutput()
	w := New(o, 4)
	w.SetNotice(notice)
	o.hold()
	writeNow(t, w, entry(1))
	<-o.blocked
	writeNow(t, w, entry(2))
	writeNow(t, w, entry(3)) // dropped
	writeNow(t, w, entry(4)) // dropped
	o.release()
	w.Close(time.Second)
	want := []string{entry(1), entry(2), "dropped=2\n"}
	if got := o.got(); strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// An entry longer than the bound still goes out when nothing is queued.
func TestLongEntry(t *testing.T) {
	t.Parallel()
	o := newOutput()
	w := New(o, 4)
	long := strings.Repeat("x", 100) + "\n"
	writeNow(t, w, long)
	w.Close(time.Second)
	if got := o.got(); len(got) != 1 || got[0] != long {
		t.Errorf("output = %q, want the long entry", got)
	}
}

// Close gives up on an output that takes nothing for the stall bound, so
// that vigil exits with its code; entries after Close are dropped, never
// blocking.
func TestCloseGivesUpOnStalledOutput(t *testing.T) {
	t.Parallel()
	o := newOutput()
	w := New(o, DefaultMaxQueued)
	o.hold()
	writeNow(t, w, entry(1))
	<-o.blocked
	writeNow(t, w, entry(2))
	start := time.Now()
	w.Close(100 * time.Millisecond)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s on a stalled output, want about the 100ms stall bound", d)
	}
	writeNow(t, w, entry(3))
	o.release() // lets the goroutine end, for goleak
	<-w.done
	if got := o.got(); strings.Join(got, "") != entry(1)+entry(2) {
		t.Errorf("output = %q, want e1 and e2 alone", got)
	}
}

// An output that keeps taking entries, if slowly, is waited for.
func TestCloseWaitsForSlowOutput(t *testing.T) {
	t.Parallel()
	o := newOutput()
	o.delay = 30 * time.Millisecond // under Close's 100ms stall bound
	w := New(o, DefaultMaxQueued)
	for i := range 10 {
		writeNow(t, w, entry(i))
	}
	w.Close(100 * time.Millisecond)
	if got := o.got(); len(got) != 10 {
		t.Errorf("output took %d of 10 entries before Close returned", len(got))
	}
}

// A broken output (EPIPE) loses the entries, and nothing else: Write
// never fails.
func TestBrokenOutput(t *testing.T) {
	t.Parallel()
	o := newOutput()
	o.err = syscall.EPIPE
	w := New(o, DefaultMaxQueued)
	for i := range 10 {
		n, err := w.Write([]byte(entry(i)))
		if n != len(entry(i)) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(entry(i)))
		}
	}
	w.Close(time.Second)
	if !errors.Is(o.err, syscall.EPIPE) || len(o.got()) != 0 {
		t.Errorf("output took %q", o.got())
	}
}

func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	o := newOutput()
	w := New(o, DefaultMaxQueued)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(w, "g%d-%d\n", g, i)
			}
		}()
	}
	wg.Wait()
	w.Close(time.Second)
	if got := len(o.got()); got != 800 {
		t.Errorf("output took %d entries, want 800", got)
	}
}
