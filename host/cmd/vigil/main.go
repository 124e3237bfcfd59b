// Command vigil keeps service discovery honest for an LLM inference engine:
// it registers the worker only while its engine serves.
package main

import (
	"os"

	"github.com/vigilhq/vigil/host/internal/builtin"
	"github.com/vigilhq/vigil/host/internal/command"
)

func main() {
	if builtin.ServeIfAdapter() {
		return
	}
	os.Exit(command.Main(os.Args))
}
