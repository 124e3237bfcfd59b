package sglang

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/vigilhq/vigil/plugins/sglang/sglangpb"
	"github.com/vigilhq/vigil/sdk"
)

// OptionLayout is the engine option (--engine-option layout=...) that picks
// the sglang.runtime.v1 layout: "auto" (the default: told from the engine's
// state snapshots), "released" (Dynamo's copy, SGLang cc7d6659) or "new"
// (upstream's newer generated types: seed and guided_decoding, and
// EngineStateSnapshot numbered differently).
const OptionLayout = "layout"

// The layouts OptionLayout names.
const (
	layoutAuto     = "auto"
	layoutReleased = "released"
	layoutNew      = "new"
)

// checkLayout refuses a value of OptionLayout that names no layout, and a
// layout on the older API, which has none.
func checkLayout(option, api string) error {
	switch option {
	case "", layoutAuto:
		return nil
	case layoutReleased, layoutNew:
		if api == apiScheduler {
			return &sdk.FieldError{Field: sdk.FieldOptions, Problem: fmt.Sprintf("%s=%s: the layout is sglang.runtime.v1's; %s=%s has none", OptionLayout, option, OptionAPI, apiScheduler)}
		}
		return nil
	}
	return &sdk.FieldError{Field: sdk.FieldOptions, Problem: fmt.Sprintf("%s=%q: want %s, %s or %s", OptionLayout, option, layoutAuto, layoutReleased, layoutNew)}
}

// errLayoutUnknown is detection's error while the snapshots seen carry
// nothing that tells the layouts apart; Start tries again with the next.
var errLayoutUnknown = fmt.Errorf("the engine state snapshot carries no field that tells the sglang.runtime.v1 layouts apart "+
	"(server_status above STARTING, is_pause 5 as a bool, model_info 5, server_info 7 or models 8); set --engine-option %s=%s or %s=%s",
	OptionLayout, layoutReleased, OptionLayout, layoutNew)

// pickLayout returns the layout the option names, or the one the engine's
// first state snapshot shows.
func pickLayout(ctx context.Context, conn *grpc.ClientConn, option string) (string, error) {
	if option == layoutReleased || option == layoutNew {
		return option, nil
	}
	raw, err := firstRawSnapshot(ctx, conn)
	if err != nil {
		return "", fmt.Errorf("reading the engine state to tell its layout: %w", err)
	}
	layout, err := layoutOf(raw)
	if err == nil && layout == "" {
		err = errLayoutUnknown
	}
	return layout, err
}

// layoutOf tells the layout from a snapshot's wire form, "" when nothing
// in it does. Released: instance_id 1, revision 2, healthy 3, server_status
// 4, is_pause 5, model_info 6, server_info 7, models 8. New: 1 to 3 alike,
// is_pause 4, model_info 5, server_info 6. So field 5 as a varint (released
// is_pause), field 4 above 1 (no bool; released UP or UNHEALTHY), 7 or 8
// is the released layout, field 5 as bytes the new one. A snapshot of
// only 1 to 3, 4 = 1 and 6 fits both; proto3 leaves zero values out.
func layoutOf(raw []byte) (string, error) {
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return "", fmt.Errorf("engine state snapshot: %w", protowire.ParseError(n))
		}
		raw = raw[n:]
		value := raw
		if n = protowire.ConsumeFieldValue(num, typ, raw); n < 0 {
			return "", fmt.Errorf("engine state snapshot field %d: %w", num, protowire.ParseError(n))
		}
		raw = raw[n:]
		switch {
		case num == 5 && typ == protowire.BytesType:
			return layoutNew, nil
		case num == 5 && typ == protowire.VarintType, num == 7, num == 8:
			return layoutReleased, nil
		case num == 4 && typ == protowire.VarintType:
			if v, _ := protowire.ConsumeVarint(value); v > 1 {
				return layoutReleased, nil
			}
		}
	}
	return "", nil
}

// snapshot is one engine state snapshot, whichever the layout.
type snapshot struct {
	instance uint64
	healthy  bool
	paused   bool
	// status is the released layout's server_status; the new layout has
	// none, and its healthy alone says whether the engine is up.
	status sglangpb.ServerStatus
}

// decodeSnapshot reads a snapshot's wire form in layout.
func decodeSnapshot(raw []byte, layout string) (snapshot, error) {
	if layout == layoutNew {
		var m sglangpb.NewEngineStateSnapshot
		if err := proto.Unmarshal(raw, &m); err != nil {
			return snapshot{}, fmt.Errorf("engine state snapshot: %w", err)
		}
		return snapshot{instance: m.GetInstanceId(), healthy: m.GetHealthy(), paused: m.GetIsPause()}, nil
	}
	var m sglangpb.EngineStateSnapshot
	if err := proto.Unmarshal(raw, &m); err != nil {
		return snapshot{}, fmt.Errorf("engine state snapshot: %w", err)
	}
	return snapshot{instance: m.GetInstanceId(), healthy: m.GetHealthy(), paused: m.GetIsPause(), status: m.GetServerStatus()}, nil
}

// stateStream is a WatchEngineState stream read as wire bytes, so that
// either layout's snapshots can be told and decoded.
type stateStream struct{ grpc.ClientStream }

// openState opens WatchEngineState.
func openState(ctx context.Context, conn *grpc.ClientConn, opts ...grpc.CallOption) (stateStream, error) {
	desc := &grpc.StreamDesc{StreamName: "WatchEngineState", ServerStreams: true}
	s, err := conn.NewStream(ctx, desc, sglangpb.SglangService_WatchEngineState_FullMethodName, opts...)
	if err != nil {
		return stateStream{}, err
	}
	if err := s.SendMsg(&sglangpb.WatchEngineStateRequest{}); err != nil {
		return stateStream{}, err
	}
	return stateStream{s}, s.CloseSend()
}

// recv returns the next snapshot's wire form: every field of it is unknown
// to Empty, and kept as it came.
func (s stateStream) recv() ([]byte, error) {
	var m emptypb.Empty
	if err := s.RecvMsg(&m); err != nil {
		return nil, err
	}
	return m.ProtoReflect().GetUnknown(), nil
}

// firstRawSnapshot reads the engine's state now: the first message of
// WatchEngineState, as wire bytes.
func firstRawSnapshot(ctx context.Context, conn *grpc.ClientConn) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream
	s, err := openState(ctx, conn, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return s.recv()
}
