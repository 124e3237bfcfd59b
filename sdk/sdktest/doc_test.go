package sdktest

import (
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDocListsEveryRule: the package documentation's table of rules names
// each rule TestEngine runs, in order.
func TestDocListsEveryRule(t *testing.T) {
	src, err := os.ReadFile("sdktest.go")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([A-Z]\w+)  +\S`).FindAllSubmatch(src, -1) {
		documented = append(documented, string(m[1]))
	}
	var run []string
	for _, r := range rules {
		run = append(run, r.name)
	}
	if diff := cmp.Diff(run, documented); diff != "" {
		t.Errorf("rules in the package documentation (-run by TestEngine +documented):\n%s", diff)
	}
}
