package sglang

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
)

// TestLayoutOf: the snapshot's wire form tells the layout wherever a field
// of one layout cannot be the other's, and nothing else does.
func TestLayoutOf(t *testing.T) {
	model := &sglangpb.GetModelInfoResponse{ModelPath: "m"}
	server := &sglangpb.GetServerInfoResponse{JsonInfo: "{}"}
	wire := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	models := protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), nil)
	tests := map[string]struct {
		raw  []byte
		want string
	}{
		"released up":              {wire(&sglangpb.EngineStateSnapshot{InstanceId: 1, Healthy: true, ServerStatus: sglangpb.ServerStatus_UP}), layoutReleased},
		"released unhealthy":       {wire(&sglangpb.EngineStateSnapshot{InstanceId: 1, ServerStatus: sglangpb.ServerStatus_UNHEALTHY}), layoutReleased},
		"released paused":          {wire(&sglangpb.EngineStateSnapshot{InstanceId: 1, IsPause: true}), layoutReleased},
		"released server info":     {wire(&sglangpb.EngineStateSnapshot{InstanceId: 1, ServerInfo: server}), layoutReleased},
		"released models":          {append(wire(&sglangpb.EngineStateSnapshot{InstanceId: 1}), models...), layoutReleased},
		"new model info":           {wire(&sglangpb.NewEngineStateSnapshot{InstanceId: 1, Healthy: true, ModelInfo: model}), layoutNew},
		"new model info, empty":    {wire(&sglangpb.NewEngineStateSnapshot{InstanceId: 1, ModelInfo: &sglangpb.GetModelInfoResponse{}}), layoutNew},
		"new paused, model info":   {wire(&sglangpb.NewEngineStateSnapshot{InstanceId: 1, IsPause: true, ModelInfo: model}), layoutNew},
		"released starting, bare":  {wire(&sglangpb.EngineStateSnapshot{InstanceId: 1, ServerStatus: sglangpb.ServerStatus_STARTING}), ""},
		"released model info only": {wire(&sglangpb.EngineStateSnapshot{InstanceId: 1, Healthy: true, ModelInfo: model}), ""},
		"new healthy, bare":        {wire(&sglangpb.NewEngineStateSnapshot{InstanceId: 1, Revision: 3, Healthy: true}), ""},
		"new paused, server info":  {wire(&sglangpb.NewEngineStateSnapshot{InstanceId: 1, IsPause: true, ServerInfo: server}), ""},
		"empty":                    {nil, ""},
	}
	for name, tt := range tests {
		got, err := layoutOf(tt.raw)
		if err != nil || got != tt.want {
			t.Errorf("%s: layoutOf() = %q, %v; want %q", name, got, err, tt.want)
		}
	}
	if _, err := layoutOf([]byte{0x2a, 0x05, 0x01}); err == nil {
		t.Error("layoutOf(a truncated field 5) = nil error, want one")
	}
}
