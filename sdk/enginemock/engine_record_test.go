package enginemock

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A mock's recorded request is the state's last_request, as it was given,
// and absent before any.
func TestRecordRequest(t *testing.T) {
	e := New(Config{Model: "m"})
	if b, _ := json.Marshal(e.State()); strings.Contains(string(b), "last_request") {
		t.Errorf("state before any request has last_request: %s", b)
	}
	e.RecordRequest(wrapperspb.String("a"))
	var got struct {
		LastRequest string `json:"last_request"`
	}
	b, _ := json.Marshal(e.State())
	if err := json.Unmarshal(b, &got); err != nil || got.LastRequest != "a" {
		t.Errorf("state %s, want last_request \"a\", the protojson of the request (%v)", b, err)
	}
}
