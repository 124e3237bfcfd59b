package enginemock

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// WatchMode selects how grpc.health.v1.Health/Watch behaves. Engine servers
// differ here (vLLM streams every change, older SGLang sends one status and
// ends), and a client must cope with each. Check works normally in every mode.
type WatchMode string

const (
	// WatchNormal is grpc-go's health server: the current status, then every change.
	WatchNormal WatchMode = "normal"
	// WatchOnce sends the current status, then ends the stream with OK.
	WatchOnce WatchMode = "once"
	// WatchUnimplemented answers UNIMPLEMENTED.
	WatchUnimplemented WatchMode = "unimplemented"
	// WatchSilent sends nothing and ends the stream with OK.
	WatchSilent WatchMode = "silent"
)

// ParseWatchMode parses a WatchMode name; "" means WatchNormal.
func ParseWatchMode(s string) (WatchMode, error) {
	switch m := WatchMode(s); m {
	case "":
		return WatchNormal, nil
	case WatchNormal, WatchOnce, WatchUnimplemented, WatchSilent:
		return m, nil
	}
	return "", fmt.Errorf("enginemock: unknown watch mode %q: want normal, once, unimplemented or silent", s)
}

// HealthServer returns hs with Watch behaving as mode says, for registering
// with grpc_health_v1.RegisterHealthServer; "" means WatchNormal. Feed hs
// from Config.Publish with SetServingStatus.
func HealthServer(mode WatchMode, hs *health.Server) (healthpb.HealthServer, error) {
	m, err := ParseWatchMode(string(mode))
	if err != nil {
		return nil, err
	}
	switch m {
	case WatchOnce:
		return onceWatch{hs}, nil
	case WatchUnimplemented:
		return unimplementedWatch{hs}, nil
	case WatchSilent:
		return silentWatch{hs}, nil
	}
	return hs, nil
}

// onceWatch sends one status and ends, like older SGLang schedulers.
type onceWatch struct{ *health.Server }

func (h onceWatch) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	// Unknown services get SERVICE_UNKNOWN, as grpc-go's Watch sends them.
	st := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	if resp, err := h.Check(stream.Context(), req); err == nil {
		st = resp.GetStatus()
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: st})
}

// unimplementedWatch serves Check only.
type unimplementedWatch struct{ *health.Server }

func (unimplementedWatch) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return status.Error(codes.Unimplemented, "method Watch not implemented")
}

// silentWatch ends every Watch at once without a status.
type silentWatch struct{ *health.Server }

func (silentWatch) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	return nil
}
