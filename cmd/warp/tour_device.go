package main

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit/cuda"
)

func init() {
	registerTourPart(tourPart{order: 0, name: "device", run: tourDevice})
}

// tourDevice runs the device self-test on CUDA, or says the CPU backend is in use.
func tourDevice(ctx context.Context, env tourEnv) error {
	if env.Device == nil {
		fmt.Println("   no CUDA device: every structure below runs on its pure-Go backend")
		return nil
	}
	rep, err := cuda.SelfTest(env.Device, 256<<20)
	if err != nil {
		return err
	}
	for _, c := range rep.Checks {
		if !c.OK {
			return fmt.Errorf("self-test %s failed: %s", c.Name, c.Detail)
		}
		fmt.Printf("   %-9s ok  %s\n", c.Name, c.Detail)
	}
	fmt.Printf("   copy bandwidth %.0f GB/s of %.0f GB/s theoretical (%.0f%%)\n",
		rep.BestBandwidth()/1e9, rep.TheoreticalBandwidth/1e9, 100*rep.BestBandwidth()/rep.TheoreticalBandwidth)
	return nil
}
