// Command vigil-adapter-toy is the toy engine's vigil adapter, run by vigil
// as a plugin subprocess:
//
//	vigil run --engine toy --engine-plugin ./vigil-adapter-toy --engine-addr 127.0.0.1:50051
//
// Run by hand it says it is a plugin and exits: vigil starts it.
package main

import (
	"github.com/vigilhq/vigil/examples/adapter/toy"
	"github.com/vigilhq/vigil/sdk"
)

func main() { sdk.Serve(toy.New()) }
