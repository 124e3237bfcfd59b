package adapterkit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/adapterkit"
)

func TestCheckStart(t *testing.T) {
	t.Parallel()
	ok := sdk.StartRequest{EngineAddr: "127.0.0.1:50051"}
	with := func(f func(*sdk.StartRequest)) sdk.StartRequest {
		r := ok
		f(&r)
		return r
	}
	tests := map[string]struct {
		req     sdk.StartRequest
		options []string
		want    string // in the error; "" for none
	}{
		"valid":                     {req: ok},
		"host name":                 {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "engine.local:8000" })},
		"IPv6":                      {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "[::1]:8000" })},
		"known option":              {req: with(func(r *sdk.StartRequest) { r.Options = map[string]string{"mode": "x"} }), options: []string{"mode"}},
		"no port":                   {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "localhost" }), want: `StartRequest.EngineAddr "localhost": want host:port`},
		"empty address":             {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "" }), want: `StartRequest.EngineAddr "": want host:port`},
		"port not a number":         {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "h:http" }), want: `port "http": want a number from 1 to 65535`},
		"port 0":                    {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "h:0" }), want: `port "0": want a number from 1 to 65535`},
		"port too large":            {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "h:65536" }), want: `port "65536"`},
		"a URL":                     {req: with(func(r *sdk.StartRequest) { r.EngineAddr = "unix/h:80" }), want: `host "unix/h": want a host name or IP address`},
		"negative startup deadline": {req: with(func(r *sdk.StartRequest) { r.StartupDeadline = -time.Second }), want: "StartRequest.StartupDeadline -1s: must be a positive duration"},
		"bad health policy":         {req: with(func(r *sdk.StartRequest) { r.Health.Failures = -1 }), want: "HealthPolicy.Failures -1"},
		"unknown option, none taken": {
			req:  with(func(r *sdk.StartRequest) { r.Options = map[string]string{"tp": "2"} }),
			want: `StartRequest.Options "tp": unknown key; this adapter takes no engine options`,
		},
		"unknown options, sorted": {
			req:     with(func(r *sdk.StartRequest) { r.Options = map[string]string{"z": "", "a": "", "mode": ""} }),
			options: []string{"mode"},
			want:    `StartRequest.Options "a", "z": unknown key; this adapter accepts mode`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := adapterkit.CheckStart(tt.req, tt.options...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("CheckStart(%+v) = %v, want nil", tt.req, err)
				}
				return
			}
			var fe *sdk.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, sdk.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckStart(%+v) = %v, want a *sdk.FieldError containing %q", tt.req, err, tt.want)
			}
		})
	}
}
