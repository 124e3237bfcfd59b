package sdk

import (
	"fmt"
	"sync"

	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// generateRequestFields are the GenerateRequest field numbers this sdk
// reads: those of its descriptor that it converts into a Request.
var generateRequestFields = sync.OnceValue(func() []uint32 {
	fields := (&pluginv1.GenerateRequest{}).ProtoReflect().Descriptor().Fields()
	out := make([]uint32, 0, fields.Len())
	for i := range fields.Len() {
		if n := fields.Get(i).Number(); !notConverted[n] {
			out = append(out, uint32(n))
		}
	}
	return out
})

// notConverted are the fields of this round's worker API (docs/worker-api.md)
// that the sdk does not yet convert into a Request: an adapter built with
// it must not claim to read them, or the host would send them to be
// dropped. Each leaves this set with its conversion.
// 20 (native n) waits for chunk indexes across the plugin boundary: the host
// fans n out instead; 22 (the prompt's ids) is not needed by a host that
// tokenizes.
var notConverted = map[protoreflect.FieldNumber]bool{20: true, 22: true}

// requestFields is what the host knows of the GenerateRequest fields an
// adapter reads, from its Info.
type requestFields struct {
	adapter string                            // the adapter's name, for errors
	known   map[protoreflect.FieldNumber]bool // nil: every field this sdk sends
}

// errNoRequestFields refuses, at Info, an adapter that forwards requests
// but lists no Capabilities.generate_request_fields: every sdk from
// v0.1.0 on lists them, and the host cannot tell which fields it would
// drop.
var errNoRequestFields = fmt.Errorf("%w: the adapter forwards requests (Capabilities.generate) but lists no Capabilities.generate_request_fields: "+
	"rebuild it with vigil's sdk v0.1.0 or later, or, written without the sdk, list the GenerateRequest field numbers it reads", ErrUnimplemented)

// newRequestFields reads an adapter's Capabilities.generate_request_fields;
// nil when it reports none.
func newRequestFields(adapter string, reported []uint32) *requestFields {
	if len(reported) == 0 {
		return nil
	}
	known := make(map[protoreflect.FieldNumber]bool)
	for _, n := range reported {
		known[protoreflect.FieldNumber(n)] = true
	}
	all := true
	for _, n := range generateRequestFields() {
		all = all && known[protoreflect.FieldNumber(n)]
	}
	if all {
		known = nil
	}
	return &requestFields{adapter: adapter, known: known}
}

// check reports, wrapping ErrInvalidArgument, the first field set in p
// that the adapter would not read, naming it: an adapter built with an
// older sdk would drop it, and the client would get less than it asked
// for without a word. A nil f (no Info yet, in tests) checks nothing.
func (f *requestFields) check(p *pluginv1.GenerateRequest) error {
	if f == nil || f.known == nil {
		return nil
	}
	var unread protoreflect.Name
	p.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !f.known[fd.Number()] {
			unread = fd.Name()
			return false
		}
		return true
	})
	if unread == "" {
		return nil
	}
	return fmt.Errorf("%w: %s: adapter %q was built with a vigil sdk that does not pass %s to the engine; omit it, or rebuild the adapter with a newer sdk",
		ErrInvalidArgument, unread, f.adapter, unread)
}
