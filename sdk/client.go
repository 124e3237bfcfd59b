package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pluginv1 "github.com/vigilhq/vigil/proto/vigil/plugin/v1"
)

// engineClient is the host's view of an adapter subprocess: an Engine whose
// calls travel over vigil.plugin.v1.
type engineClient struct {
	client pluginv1.EngineClient
	// exited reports whether the adapter process is gone; nil in tests
	// without a process.
	exited func() bool
}

var _ Engine = (*engineClient)(nil)

func (c *engineClient) err(err error) error { return fromStatus(err, c.exited) }

func (c *engineClient) Info(ctx context.Context) (AdapterInfo, error) {
	resp, err := c.client.Info(ctx, &pluginv1.InfoRequest{})
	if err != nil {
		return AdapterInfo{}, c.err(err)
	}
	return AdapterInfo{
		Name:         resp.GetName(),
		Version:      resp.GetVersion(),
		Capabilities: capabilitiesFromProto(resp.GetCapabilities()),
	}, nil
}

func (c *engineClient) Start(ctx context.Context, req StartRequest) (Worker, error) {
	resp, err := c.client.Start(ctx, startRequestToProto(req))
	if err != nil {
		return Worker{}, c.err(err)
	}
	return workerFromProto(resp.GetWorker()), nil
}

// WatchAvailability relays the adapter's stream. Whatever ends the stream
// other than a Lost event or ctx (the adapter dying, a transport error)
// becomes a final Lost event, so the host never mistakes silence for health.
func (c *engineClient) WatchAvailability(ctx context.Context) (<-chan Event, error) {
	stream, err := c.client.WatchAvailability(ctx, &pluginv1.WatchAvailabilityRequest{})
	if err != nil {
		return nil, c.err(err)
	}
	out := make(chan Event)
	go func() {
		defer close(out)
		for {
			msg, err := stream.Recv()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				reason := "adapter ended the availability stream"
				if !errors.Is(err, io.EOF) {
					reason = fmt.Sprintf("adapter availability stream failed: %v", c.err(err))
				}
				select {
				case out <- Event{Availability: Lost, Reason: reason, Time: time.Now()}:
				case <-ctx.Done():
				}
				return
			}
			ev := eventFromProto(msg)
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			if ev.Availability == Lost {
				return
			}
		}
	}()
	return out, nil
}

func (c *engineClient) Shutdown(ctx context.Context) error {
	_, err := c.client.Shutdown(ctx, &pluginv1.ShutdownRequest{})
	return c.err(err)
}
