// Command toy-engine runs the toy engine, the engine the example adapter
// watches, on --listen until SIGTERM or SIGINT. SIGUSR1 pauses it (vigil
// withdraws the worker and stays up) and SIGUSR2 resumes it.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/examples/adapter/engine"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:50051", "gRPC address to serve on, host:port")
	model := flag.String("model", "toy-model", "model name the engine reports")
	delay := flag.Duration("token-delay", 20*time.Millisecond, "time between two generated tokens")
	flag.Parse()

	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	s := engine.New(engine.Config{Model: *model, TokenDelay: *delay})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for sig := range sigs {
			switch sig {
			case syscall.SIGUSR1:
				s.Pause(true)
				log.Print("paused")
			case syscall.SIGUSR2:
				s.Pause(false)
				log.Print("resumed")
			default:
				log.Printf("%s: stopping", sig)
				s.Stop()
				return
			}
		}
	}()
	log.Printf("toy engine %s serving %s on %s", engine.Version, *model, lis.Addr())
	if err := s.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
