package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/graph"
	"github.com/warpkit/warpkit/graph/graphio"
	"github.com/warpkit/warpkit/internal/cli"
)

func init() {
	register(&command{name: "graph", summary: "graph files: info (counts and degrees of a MatrixMarket, SNAP or METIS file), gen (RMAT, RGG, Delaunay, road, 3-D mesh, stand-ins), standins, tc (triangle count)", run: runGraph})
}

const graphUsage = `usage: warp graph <subcommand> [flags]

subcommands:
  info [flags] <file>                vertices, entries and degrees of a graph file (.mtx, .graph/.metis,
                                     .txt/.el/.edges/.tsv as SNAP, .wkg; .gz too)
  gen <model> [flags] --out <file>   generate a graph and write it as a SNAP edge list (.wkg: binary CSR;
                                     .gz: compressed):
                                     rmat (Graph500 Kronecker: --scale, --edge-factor), rgg (DIMACS10 random
                                     geometric: --scale), delaunay (--scale), road (--vertices, --degree),
                                     mesh3d (--vertices, --degree), standin --name N (a stand-in for a
                                     dataset of the thesis)
  standins [--generate] [--max-entries N]
                                     list the stand-ins and the datasets they stand for; --generate makes
                                     each (up to N dataset entries) and compares its size
  tc [--backend B] <file>            count the triangles of a graph file (read as undirected), timing the
                                     build and the count (package graph: the CUDA backend where there is a
                                     device, else the CPU one)
`

func runGraph(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(os.Stderr, graphUsage)
		if len(args) == 0 {
			return cli.InCommand("warp graph", fmt.Errorf("%w: name a subcommand", cli.ErrUsage))
		}
		return nil
	}
	switch args[0] {
	case "info":
		return cli.InCommand("warp graph info", graphInfo(args[1:], os.Stdout))
	case "gen":
		return cli.InCommand("warp graph gen", graphGen(args[1:], os.Stdout))
	case "standins":
		return cli.InCommand("warp graph standins", graphStandIns(args[1:], os.Stdout))
	case "tc":
		return cli.InCommand("warp graph tc", graphTC(args[1:], os.Stdout))
	}
	return cli.InCommand("warp graph", fmt.Errorf("%w: unknown subcommand %q (have info, gen, standins, tc)", cli.ErrUsage, args[0]))
}

func graphTC(args []string, w io.Writer) error {
	fs := cli.NewFlags("graph tc", "[--backend B] <file>")
	backend := warpkit.Auto
	fs.TextVar(&backend, "backend", warpkit.Auto, "graph backend: auto, cpu or cuda")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: name one graph file", cli.ErrUsage)
	}
	// Each phase says when it starts (stderr): big graphs take seconds each.
	phase := func(what string) { fmt.Fprintf(os.Stderr, "warp graph tc: %s...\n", what) }
	phase("reading " + fs.Arg(0))
	t0 := time.Now()
	e, err := graphio.ReadFile(fs.Arg(0), graphio.ReadOptions{})
	if err != nil {
		return err
	}
	read := time.Since(t0)
	g, err := graph.New(graph.Options{Backend: backend, VertexCapacity: e.NumVertices})
	if err != nil {
		return err
	}
	defer g.Close()
	ctx := context.Background()
	phase(fmt.Sprintf("building (%d entries)", e.Len()))
	t0 = time.Now()
	if err := g.Build(ctx, e.Src, e.Dst); err != nil {
		return err
	}
	build := time.Since(t0)
	phase("counting triangles")
	t0 = time.Now()
	n, err := g.TriangleCount(ctx)
	if err != nil {
		return err
	}
	count := time.Since(t0)
	st, err := g.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d triangles; %d vertices, %d edges (%d entries), %d self-loops skipped\n", fs.Arg(0), n, st.Vertices, st.Edges, st.Entries, st.SelfLoopsSkipped)
	fmt.Fprintf(w, "backend %s: read %v, build %v, count %v\n", g.Backend(), read.Round(time.Millisecond), build.Round(time.Millisecond), count.Round(time.Millisecond))
	return nil
}

func graphInfo(args []string, w io.Writer) error {
	fs := cli.NewFlags("graph info", "[--symmetrize] [--dedup] [--drop-self-loops] <file>")
	var opts graphio.ReadOptions
	fs.BoolVar(&opts.Symmetrize, "symmetrize", false, "add the reverse of every entry")
	fs.BoolVar(&opts.Dedup, "dedup", false, "keep one entry per (src, dst)")
	fs.BoolVar(&opts.DropSelfLoops, "drop-self-loops", false, "drop entries from a vertex to itself")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: name one graph file", cli.ErrUsage)
	}
	e, err := graphio.ReadFile(fs.Arg(0), opts)
	if err != nil {
		return err
	}
	d := graphio.DegreeStats(e)
	kind := "undirected (as stored)"
	if e.Directed {
		kind = "directed"
	}
	fmt.Fprintf(w, "%s: %s, %d vertices, %d entries, weighted %v\n", fs.Arg(0), kind, d.Vertices, d.Entries, e.W != nil)
	fmt.Fprintf(w, "out-degree: min %d, max %d, mean %.2f, std dev %.2f; %d vertices without entries\n", d.Min, d.Max, d.Mean, d.StdDev, d.Isolated)
	if opts.DropSelfLoops || opts.Dedup {
		fmt.Fprintf(w, "removed: %d self-loops, %d duplicate entries\n", e.SelfLoops, e.Duplicates)
	}
	return nil
}

func graphGen(args []string, w io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: name a generator (rmat, rgg, delaunay, road, mesh3d, standin)", cli.ErrUsage)
	}
	model := args[0]
	fs := cli.NewFlags("graph gen "+model, "[flags] --out <file>")
	scale := cli.IntFlag(fs, "scale", 16, 1, 31, "log2 of the vertex count")
	ef := cli.IntFlag(fs, "edge-factor", 16, 1, 1<<16, "RMAT: entries per vertex")
	vertices := cli.IntFlag(fs, "vertices", 1<<16, 2, 1<<30, "road, mesh3d: vertices")
	degree := fs.Float64("degree", 0, "road, mesh3d: mean entries per vertex (default 2.2 for road, 48 for mesh3d)")
	name := fs.String("name", "", "standin: the dataset (warp graph standins lists them)")
	seed := fs.Uint64("seed", 1, "random seed (the graph depends on it alone)")
	out := fs.String("out", "", "output file: a SNAP edge list, or binary CSR for a .wkg name; a .gz name is compressed")
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: --out is required", cli.ErrUsage)
	}
	switch filepath.Ext(strings.TrimSuffix(strings.ToLower(*out), ".gz")) {
	case ".txt", ".el", ".edges", ".tsv", ".wkg":
	default:
		return fmt.Errorf("%w: --out %s: name it .txt, .el, .edges or .tsv (SNAP) or .wkg, optionally .gz, so that warp graph info reads it back", cli.ErrUsage, *out)
	}
	var e *graphio.Edges
	var err error
	switch model {
	case "rmat":
		e, err = graphio.RMAT(*scale, *ef, graphio.RMATOptions{Seed: *seed})
	case "rgg":
		if *scale > 28 {
			return fmt.Errorf("%w: rgg --scale is at most 28", cli.ErrUsage)
		}
		e, err = graphio.RGG(*scale, *seed)
	case "delaunay":
		if *scale > 26 {
			return fmt.Errorf("%w: delaunay --scale is at most 26", cli.ErrUsage)
		}
		e, err = graphio.Delaunay(*scale, *seed)
	case "road":
		e, err = graphio.Road(*vertices, cmp.Or(*degree, 2.2), *seed)
	case "mesh3d":
		e, err = graphio.Mesh3D(*vertices, cmp.Or(*degree, 48), *seed)
	case "standin":
		i := slices.IndexFunc(graphio.StandIns(), func(st graphio.StandIn) bool { return st.Name == *name })
		if i < 0 {
			return fmt.Errorf("%w: --name %q: not a stand-in (warp graph standins lists them)", cli.ErrUsage, *name)
		}
		e, err = graphio.StandIns()[i].Generate(*seed)
	default:
		return fmt.Errorf("%w: unknown generator %q (have rmat, rgg, delaunay, road, mesh3d, standin)", cli.ErrUsage, model)
	}
	if err != nil && model != "standin" {
		err = fmt.Errorf("%w: %v", cli.ErrUsage, err) // out-of-range sizes and degrees
	}
	if err != nil {
		return err
	}
	if err := writeGraph(*out, e); err != nil {
		return err
	}
	d := graphio.DegreeStats(e)
	fmt.Fprintf(w, "%s: %d vertices, %d entries, out-degree min %d / max %d / mean %.2f\n", *out, d.Vertices, d.Entries, d.Min, d.Max, d.Mean)
	return nil
}

// writeGraph writes e to path as a SNAP edge list, or as .wkg (binary CSR)
// for a .wkg name, compressed for a .gz name; a failure removes the partial
// file.
func writeGraph(path string, e *graphio.Edges) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	var dst io.Writer = f
	name := strings.ToLower(path)
	if strings.HasSuffix(name, ".gz") {
		z := gzip.NewWriter(f)
		defer func() {
			if cerr := z.Close(); err == nil {
				err = cerr
			}
		}()
		dst, name = z, strings.TrimSuffix(name, ".gz")
	}
	if strings.HasSuffix(name, ".wkg") {
		return graphio.WriteWKG(dst, e)
	}
	return graphio.WriteSNAP(dst, e)
}

func graphStandIns(args []string, w io.Writer) error {
	fs := cli.NewFlags("graph standins", "[--generate] [--max-entries N]")
	generate := fs.Bool("generate", false, "generate each stand-in and compare its entries with its dataset's (the spec's Table 5.1 target: within 15%)")
	maxEntries := fs.Int64("max-entries", 1<<62, "with --generate: skip datasets of more entries")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	for _, st := range graphio.StandIns() {
		fmt.Fprintf(w, "%-18s %-15s stands for %11d vertices, %11d entries", st.Name, st.Model, st.Vertices, st.Entries)
		if !*generate || int64(st.Entries) > *maxEntries {
			fmt.Fprintln(w)
			continue
		}
		t0 := time.Now()
		e, err := st.Generate(*seed)
		if err != nil {
			return err
		}
		d := graphio.DegreeStats(e)
		r := float64(e.Len()) / float64(st.Entries)
		within := "within 15%"
		if r < 0.85 || r > 1.15 {
			within = "OUTSIDE 15%"
		}
		fmt.Fprintf(w, "; generated %11d vertices, %11d entries (%.2fx, %s), degree max %d mean %.1f, in %v\n",
			d.Vertices, d.Entries, r, within, d.Max, d.Mean, time.Since(t0).Round(time.Millisecond))
	}
	return nil
}
