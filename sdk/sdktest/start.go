package sdktest

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/vigilhq/vigil/sdk"
)

func checkInfo(t tb, k *kit) {
	e := k.engine(t)
	info, err := await(t, "Info", func() (sdk.AdapterInfo, error) { return e.Info(t.Context()) })
	if err != nil {
		t.Fatalf("Info() error = %v, want nil: Info must not need an engine", err)
	}
	if info.Name != k.h.Name {
		t.Errorf("Info() Name = %q, want %q", info.Name, k.h.Name)
	}
	if info.Version == "" {
		t.Error(`Info() Version = "", want a version`)
	}
}

// badAddrs are engine addresses that are not host:port with a port from 1
// to 65535.
var badAddrs = []string{"", "no-port", "127.0.0.1:1:2", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:port"}

func checkStartInvalidAddress(t tb, k *kit) {
	for _, addr := range badAddrs {
		e := k.engine(t)
		// The short deadline makes an adapter that waits for such an
		// address fail with the wrong error, not hang.
		_, err := start(t, e, t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: shortDeadline, Health: health, Options: k.h.Options})
		if !isFieldError(err, sdk.FieldEngineAddr, "") {
			t.Errorf("Start(EngineAddr: %q) error = %v, want a *sdk.FieldError for %s (wrapping sdk.ErrInvalidArgument)", addr, err, sdk.FieldEngineAddr)
		}
	}
}

// unknownOption is an engine option key no adapter takes.
const unknownOption = "sdktest-unknown-option"

func checkStartUnknownOption(t tb, k *kit) {
	e := k.engine(t)
	addr, _ := k.serving(t)
	req := k.startRequest(addr)
	req.Options = maps.Clone(req.Options)
	if req.Options == nil {
		req.Options = map[string]string{}
	}
	req.Options[unknownOption] = "1"
	_, err := start(t, e, t.Context(), req)
	if !isFieldError(err, sdk.FieldOptions, unknownOption) {
		t.Errorf("Start(Options: {%q: \"1\"}) error = %v, want a *sdk.FieldError for %s naming %q: an adapter rejects options it does not know", unknownOption, err, sdk.FieldOptions, unknownOption)
	}
}

// isFieldError reports whether err is a *sdk.FieldError for field, wrapping
// sdk.ErrInvalidArgument, whose Problem contains key.
func isFieldError(err error, field, key string) bool {
	var fe *sdk.FieldError
	return errors.Is(err, sdk.ErrInvalidArgument) && errors.As(err, &fe) && fe.Field == field && strings.Contains(fe.Problem, key)
}

func checkWatchBeforeStart(t tb, k *kit) {
	e := k.engine(t)
	events, err := await(t, "WatchAvailability", func() (<-chan sdk.Event, error) { return e.WatchAvailability(t.Context()) })
	if !errors.Is(err, sdk.ErrNotStarted) {
		t.Errorf("WatchAvailability() before Start: error = %v, want an error wrapping sdk.ErrNotStarted", err)
	}
	if events != nil {
		t.Error("WatchAvailability() before Start returned a channel, want nil with the error")
	}
}

func checkStart(t tb, k *kit) {
	e := k.engine(t)
	addr, _ := k.serving(t)
	w := k.started(t, e, addr)
	if w.ServedModelName == "" && !k.h.Unnamed {
		t.Errorf("Start(%s) Worker = %+v, want a non-empty ServedModelName", addr, w)
	}
}

func checkStartTwice(t tb, k *kit) {
	e := k.engine(t)
	addr, _ := k.serving(t)
	k.started(t, e, addr)
	if _, err := start(t, e, t.Context(), k.startRequest(addr)); !errors.Is(err, sdk.ErrAlreadyStarted) {
		t.Errorf("second Start(%s) error = %v, want an error wrapping sdk.ErrAlreadyStarted", addr, err)
	}
}

func checkStartupDeadline(t tb, k *kit) {
	e := k.engine(t)
	addr := closedAddr(t)
	began := time.Now()
	_, err := start(t, e, t.Context(), sdk.StartRequest{EngineAddr: addr, StartupDeadline: shortDeadline, Health: health, Options: k.h.Options})
	took := time.Since(began)
	if !errors.Is(err, sdk.ErrStartupDeadline) {
		t.Errorf("Start(%s, StartupDeadline: %v) with nothing listening: error = %v, want an error wrapping sdk.ErrStartupDeadline", addr, shortDeadline, err)
	}
	// A check under way when the deadline passes may take its Timeout.
	if most := shortDeadline + health.Timeout + slack; took < shortDeadline || took > most {
		t.Errorf("Start gave up after %v, want it to wait the startup deadline %v and give up then (by %v)", took, shortDeadline, most)
	}
}

func checkStartCanceled(t tb, k *kit) {
	// Nothing listens, so only ctx can end Start before its hour.
	req := sdk.StartRequest{EngineAddr: closedAddr(t), StartupDeadline: time.Hour, Health: health, Options: k.h.Options}
	t.Run("before Start", func(t tb) {
		e := k.engine(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := start(t, e, ctx, req); !errors.Is(err, context.Canceled) {
			t.Errorf("Start() with a cancelled ctx: error = %v, want an error wrapping context.Canceled", err)
		}
	})
	t.Run("while waiting", func(t tb) {
		e := k.engine(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer time.AfterFunc(100*time.Millisecond, cancel).Stop()
		if _, err := start(t, e, ctx, req); !errors.Is(err, context.Canceled) {
			t.Errorf("Start() cancelled while waiting for the engine: error = %v, want an error wrapping context.Canceled", err)
		}
	})
	t.Run("ctx deadline", func(t tb) {
		e := k.engine(t)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := start(t, e, ctx, req)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sdk.ErrStartupDeadline) {
			t.Errorf("Start() whose ctx passed its deadline: error = %v, want an error wrapping context.DeadlineExceeded, not sdk.ErrStartupDeadline", err)
		}
	})
}

func checkShutdownIdempotent(t tb, k *kit) {
	e := k.engine(t)
	addr, _ := k.serving(t)
	k.started(t, e, addr)
	for _, which := range []string{"first", "second"} {
		if _, err := await(t, "Shutdown", func() (struct{}, error) { return struct{}{}, e.Shutdown(t.Context()) }); err != nil {
			t.Errorf("%s Shutdown() = %v, want nil", which, err)
		}
	}
}
