package discovery

import "github.com/hashicorp/go-hclog"

// logEvery is how often a persisting backend failure is logged again: the
// first failure of a run and every 10th after it (1, 11, 21, ...), so that
// an unreachable Consul does not flood the log.
const logEvery = 10

// Failures counts a run of backend failures and logs the first, every
// logEvery-th after it, and the recovery; the announcer and every
// Discoverer log through one. The zero value is ready; it is not safe for
// concurrent use.
type Failures struct{ n int }

// Fail counts a failure and, when it is due, logs msg at warn level with
// args and the count so far.
func (f *Failures) Fail(log hclog.Logger, msg string, args ...any) {
	f.FailAt(log, hclog.Warn, msg, args...)
}

// FailAt is Fail at level: Error for a failure that retrying alone will
// not mend, such as ErrPermissionDenied.
func (f *Failures) FailAt(log hclog.Logger, level hclog.Level, msg string, args ...any) {
	f.n++
	if f.n%logEvery == 1 {
		log.Log(level, msg, append(args, "failures", f.n)...)
	}
}

// Recover ends a run of failures: when there was one, it logs msg at info
// level with args and the run's length.
func (f *Failures) Recover(log hclog.Logger, msg string, args ...any) {
	if f.n > 0 {
		log.Info(msg, append(args, "failures", f.n)...)
		f.n = 0
	}
}

// Skips logs the registrations a Discoverer leaves out because FromMeta
// refused their metadata: each once while it stays in the backend, not at
// every read (the file registry is read every 100ms). The zero value is
// ready; it is not safe for concurrent use.
type Skips struct{ logged, read map[string]string }

// Skip leaves out the registration id (the backend's name for it) for
// err, logging it at warn level with args unless the last read left it out
// for the same reason.
func (s *Skips) Skip(log hclog.Logger, id string, err error, args ...any) {
	if s.read == nil {
		s.read = make(map[string]string)
	}
	reason := err.Error()
	s.read[id] = reason
	if s.logged[id] != reason {
		log.Warn("leaving out a registration that no current vigil wrote", append(args, "id", id, "reason", reason)...)
	}
}

// Read ends one read of the backend: what it did not leave out is
// forgotten, so that a registration that comes back is logged again.
func (s *Skips) Read() { s.logged, s.read = s.read, nil }
