package healthwatch_test

import (
	"context"
	"errors"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// A watch whose streams, reopened after a recycled connection, count only
// once the engine's lifetime id is still the one first seen.
func ExampleWatchWith() {
	conn, err := grpc.NewClient("127.0.0.1:50051", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	lifetimeID := func(context.Context) (string, error) { return "a", nil } // the engine's own RPC
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := healthwatch.WatchWith(ctx, conn, "", sdk.HealthPolicy{}, healthwatch.WatchOptions{
		Reopened: func(ctx context.Context) error {
			if id, err := lifetimeID(ctx); err != nil || id != "a" {
				return errors.Join(errors.New("engine replaced"), err)
			}
			return nil
		},
	})
	for u := range updates {
		if u.Err != nil {
			log.Printf("lost: %v", u.Err)
			break
		}
		log.Printf("status: %v", u.Status)
	}
}
