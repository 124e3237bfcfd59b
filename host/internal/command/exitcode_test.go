package command

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/host/internal/outcome"
)

// docExitCodes reads the exit-code table of docs/operating.md: the "when"
// cell of each code.
func docExitCodes(t *testing.T) map[int]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Exit codes\n")
	if !ok {
		t.Fatal(`docs/operating.md has no "## Exit codes" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (.+) \|$`)
	rows := map[int]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		code, _ := strconv.Atoi(m[1])
		rows[code] = m[2]
	}
	if len(rows) == 0 {
		t.Fatal("docs/operating.md's exit-code table has no rows")
	}
	return rows
}

// TestExitCodesMatchDocs holds the exit-code table of docs/operating.md
// and exitCodes together: every row of one has its code in the other, each
// row of exitCodes is said in the table's row for its code, and each
// decides the code of the outcome it names.
func TestExitCodesMatchDocs(t *testing.T) {
	t.Parallel()
	doc := docExitCodes(t)
	codes := map[int]bool{}
	for _, r := range exitCodes {
		codes[r.code] = true
		when, ok := doc[r.code]
		if !ok {
			t.Errorf("docs/operating.md has no row for exit code %d (%s)", r.code, r.when)
		} else if !strings.Contains(when, r.when) {
			t.Errorf("docs/operating.md's row for exit code %d does not say %q:\n%s", r.code, r.when, when)
		}
		var err error
		switch r.err {
		case nil:
		case errOther:
			err = errors.New("listening: address in use")
		default:
			err = fmt.Errorf("wrapped: %w", r.err)
		}
		if got := exitCode(err); got != r.code {
			t.Errorf("exitCode(%v) = %d, want %d: an earlier row shadows it", err, got, r.code)
		}
	}
	for code, when := range doc {
		if !codes[code] {
			t.Errorf("docs/operating.md's row for exit code %d is in no row of exitCodes: %s", code, when)
		}
	}
}

// An outcome that wraps two reasons gets the code of the row that comes
// first: an invalid configuration stays one, and a drain that outlived its
// budget says so whatever ended the lifecycle.
func TestExitCodePrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"config, then a cut drain", errors.Join(outcome.ErrConfig, outcome.ErrDrainCut), ExitConfig},
		{"loss, then the budget", errors.Join(outcome.ErrEngineLost, outcome.ErrShutdownBudget), ExitShutdownBudget},
		{"stop, then a cut drain", outcome.ErrDrainCut, ExitFailure},
		{"bad input", &configError{msg: "--x"}, ExitConfig},
		{"as exitError", exit(&configError{msg: "--x"}), ExitConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := exitCode(tc.err); got != tc.want {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
