package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"time"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/cli"
)

func init() {
	register(&command{name: "tour", summary: "show each warpkit structure working on a small workload", run: runTour})
}

// tourEnv is what a tour part gets: the backend in use and, for CUDA, the device.
type tourEnv struct {
	Backend warpkit.Backend // CPU or CUDA, resolved
	Device  *cuda.Device    // nil on the CPU backend
}

// tourPart shows one structure. Parts run in order; each prints what it did and
// how fast, and returns an error only when something did not work.
type tourPart struct {
	order int
	name  string
	run   func(ctx context.Context, env tourEnv) error
}

var tourParts []tourPart

func registerTourPart(p tourPart) { tourParts = append(tourParts, p) }

func runTour(args []string) error {
	fs := cli.NewFlags("tour", "[--backend auto|cpu|cuda]")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "backend: auto (CUDA if present), cpu or cuda")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	dev, err := warpkit.OpenDevice(backend, 0)
	if err != nil {
		return err
	}
	env := tourEnv{Backend: warpkit.CPU, Device: dev}
	if dev != nil {
		defer dev.Close()
		env.Backend = warpkit.CUDA
		p := dev.Properties()
		fmt.Printf("warpkit tour on the CUDA backend: %s (cc %s, %d SMs, %.0f GiB)\n\n",
			p.Name, p.ComputeCapability(), p.Multiprocessors, float64(p.TotalMemory)/(1<<30))
	} else {
		fmt.Println("warpkit tour on the CPU backend (no CUDA device in use)")
		fmt.Println()
	}
	sort.SliceStable(tourParts, func(i, j int) bool { return tourParts[i].order < tourParts[j].order })
	for _, p := range tourParts {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Printf("== %s\n", p.name)
		start := time.Now()
		if err := p.run(ctx, env); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Printf("   (%s)\n\n", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
