package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"

	btreebench "github.com/warpkit/warpkit/bench/btree"
	graphbench "github.com/warpkit/warpkit/bench/graph"
	hashbench "github.com/warpkit/warpkit/bench/hash"
	kvcompactbench "github.com/warpkit/warpkit/bench/kvcompact"
	latencybench "github.com/warpkit/warpkit/bench/latency"
	lsmbench "github.com/warpkit/warpkit/bench/lsm"
	mvbtreebench "github.com/warpkit/warpkit/bench/mvbtree"
	primbench "github.com/warpkit/warpkit/bench/prim"
	"github.com/warpkit/warpkit/internal/cli"
)

func init() {
	register(&command{name: "bench", summary: "benchmark a structure against its baselines: warp bench <structure> -h", run: runBench})
	// The benchmarks live in bench/<structure>; warp bench only dispatches.
	registerBench(&benchmark{name: "btree", summary: btreebench.Summary, run: btreebench.Run})
	registerBench(&benchmark{name: "graph", summary: graphbench.Summary, run: graphbench.Run})
	registerBench(&benchmark{name: "hash", summary: hashbench.Summary, run: hashbench.Run})
	registerBench(&benchmark{name: "kvcompact", summary: kvcompactbench.Summary, run: kvcompactbench.Run})
	registerBench(&benchmark{name: "latency", summary: latencybench.Summary, run: latencybench.Run})
	registerBench(&benchmark{name: "lsm", summary: lsmbench.Summary, run: lsmbench.Run})
	registerBench(&benchmark{name: "mvbtree", summary: mvbtreebench.Summary, run: mvbtreebench.Run})
	registerBench(&benchmark{name: "prim", summary: primbench.Summary, run: primbench.Run})
}

// benchmark reproduces one structure's experiments; it parses its own flags
// and writes its report to w.
type benchmark struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, w io.Writer) error
}

var benchmarks = map[string]*benchmark{}

func registerBench(b *benchmark) {
	if _, dup := benchmarks[b.name]; dup {
		panic("warp: benchmark registered twice: " + b.name)
	}
	benchmarks[b.name] = b
}

func runBench(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: warp bench <structure> [flags]\n\nstructures:")
		for _, name := range sortedKeys(benchmarks) {
			fmt.Fprintf(os.Stderr, "  %-8s %s\n", name, benchmarks[name].summary)
		}
		if len(benchmarks) == 0 {
			fmt.Fprintln(os.Stderr, "  (none yet)")
		}
		fmt.Fprintln(os.Stderr, "\nAll but kv and kvcompact measure a GPU (kvcompact's --engines gpu does too). Without one (or with --backend cpu) the parts that have a CPU variant run at\n"+
			"small sizes, and warp bench <structure> -h says what needs a GPU; their --plot DIR writes every table as\n"+
			"PNG and SVG.")
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
	return cli.InCommand("warp bench "+b.name, b.run(ctx, args[1:], os.Stdout))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
