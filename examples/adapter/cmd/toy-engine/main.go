// Command toy-engine serves the toy engine (package fakeengine) on
// --listen until SIGTERM or SIGINT, for the demo and vigil's own tests.
// SIGUSR1 pauses it (vigil withdraws the worker and stays up) and SIGUSR2
// resumes it. An adapter's own module drops it: its engine is someone
// else's program.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/examples/adapter/fakeengine"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:50051", "gRPC address to serve on, host:port")
	model := flag.String("model", fakeengine.Model, "model name the engine reports")
	delay := flag.Duration("token-delay", 20*time.Millisecond, "time between two generated tokens")
	flag.Parse()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	e := fakeengine.Serve(lis, fakeengine.Config{Model: *model, TokenDelay: *delay})
	log.Printf("toy engine %s serving %s on %s", fakeengine.Version, *model, e.Addr)
	for sig := range sigs {
		switch sig {
		case syscall.SIGUSR1:
			e.Pause(true)
			log.Print("paused")
		case syscall.SIGUSR2:
			e.Pause(false)
			log.Print("resumed")
		default:
			log.Printf("%s: stopping", sig)
			if err := e.Stop(); err != nil {
				log.Fatal(err)
			}
			return
		}
	}
}
