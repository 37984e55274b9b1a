package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"

	"github.com/warpkit/warpkit/internal/cli"
)

func init() {
	register(&command{name: "bench", summary: "benchmark a structure against its baselines: warp bench <structure> -h", run: runBench})
}

// benchmark reproduces one structure's experiments; it parses its own flags.
type benchmark struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var benchmarks = map[string]*benchmark{}

func registerBench(b *benchmark) { benchmarks[b.name] = b }

func runBench(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: warp bench <structure> [flags]\n\nstructures:")
		for _, name := range sortedKeys(benchmarks) {
			fmt.Fprintf(os.Stderr, "  %-8s %s\n", name, benchmarks[name].summary)
		}
		if len(benchmarks) == 0 {
			fmt.Fprintln(os.Stderr, "  (none yet)")
		}
		if len(args) == 0 {
			return fmt.Errorf("%w: name a structure", cli.ErrUsage)
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown structure %q (have: %s)", cli.ErrUsage, args[0], joinNames(benchmarks))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return cli.InCommand("warp bench "+b.name, b.run(ctx, args[1:]))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
