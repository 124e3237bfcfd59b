package pluginhost_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/pluginhost"
)

// A host starts an adapter executable, asks what it is, and stops it;
// a file that is not an adapter is told apart from one that failed.
func ExampleLaunch() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := pluginhost.Launch(ctx, pluginhost.LaunchConfig{
		Cmd:    exec.Command("./vigil-adapter-toy"),
		Name:   "toy",
		Logger: hclog.Default(),
	})
	if errors.Is(err, pluginhost.ErrNotPlugin) {
		fmt.Println("not a vigil engine adapter:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.KillContext(ctx)
	info, err := p.Engine.Info(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, forwards := p.Engine.(sdk.Generator)
	fmt.Println(info.Name, info.Version, p.Version, forwards && info.Capabilities.Generate)
}

// A host that must tell a frozen adapter (stopped, swapped out, its server
// wedged) from a busy one pings it under a deadline: a frozen adapter
// answers nothing, so the ping fails when the deadline passes.
func ExamplePlugin_Ping() {
	ctx := context.Background()
	p, err := pluginhost.Launch(ctx, pluginhost.LaunchConfig{Cmd: exec.Command("./vigil-adapter-toy")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.KillContext(ctx)
	for failures := 0; failures < 2; {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := p.Ping(pctx); err != nil {
			failures++
			fmt.Println("adapter not answering:", err)
		} else {
			failures = 0
		}
		cancel()
		time.Sleep(500 * time.Millisecond)
	}
	// Two pings in a row unanswered: kill it at once.
	expired, cancel := context.WithCancel(ctx)
	cancel()
	p.KillContext(expired)
}

// A host refuses a temporary directory too long for the adapter's socket
// before it launches anything (Launch would refuse it too).
func ExampleCheckSocketPath() {
	long := "/tmp/" + strings.Repeat("d", 115)
	err := pluginhost.CheckSocketPath([]string{"PATH=/bin", "TMPDIR=" + long})
	fmt.Println(errors.Is(err, pluginhost.ErrSocketPath))
	fmt.Println(pluginhost.CheckSocketPath([]string{"TMPDIR=/tmp"}))
	// Output:
	// true
	// <nil>
}
