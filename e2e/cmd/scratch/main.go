package main

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/e2e/harness"
)

type st struct{}

func (st) Start(name string, env []string, bin string, args ...string) (*harness.Proc, error) {
	return harness.StartProc(name, env, bin, args...)
}

func main() {
	dir, _ := os.MkdirTemp("", "cl")
	cl, err := harness.StartCluster(st{}, "/work/main/.bin/consul", dir, "x", 3, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Kill()
	cl.WaitHealthy(60 * time.Second)
	c1, c2 := cl.Clients[0], cl.Clients[1]
	c1.Client.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "s", ID: "s1", Port: 1})
	time.Sleep(2 * time.Second)
	for i := 0; i < 5; i++ {
		_, m, err := c2.Client.Health().Service("s", "", true, &api.QueryOptions{AllowStale: true})
		fmt.Println("stale", m.KnownLeader, m.LastContact, m.LastIndex, err)
		_, m, err = c2.Client.Health().Service("s", "", true, &api.QueryOptions{})
		fmt.Println("default", m.KnownLeader, m.LastContact, m.LastIndex, err)
	}
}
