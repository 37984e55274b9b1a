package main

import (
	"context"
	"fmt"
	"time"

	"github.com/warpkit/warpkit/graph"
	"github.com/warpkit/warpkit/graph/graphio"
	"github.com/warpkit/warpkit/slabhash"
)

func init() {
	registerTourPart(tourPart{order: 80, name: "graph: a dynamic graph — build, update, count triangles, rehash", run: tourGraph})
}

// tourGraph builds an RMAT graph, counts its triangles, inserts and deletes
// edges, and counts again, checking the structure's invariants.
func tourGraph(ctx context.Context, env tourEnv) error {
	e, err := graphio.RMAT(16, 8, graphio.RMATOptions{Seed: 1})
	if err != nil {
		return err
	}
	g, err := graph.New(graph.Options{Backend: env.Backend, Device: env.Device, VertexCapacity: e.NumVertices})
	if err != nil {
		return err
	}
	defer g.Close()
	start := time.Now()
	if err := g.Build(ctx, e.Src, e.Dst); err != nil {
		return err
	}
	built := time.Since(start)
	st, err := g.Stats(ctx)
	if err != nil {
		return err
	}
	start = time.Now()
	before, err := g.TriangleCount(ctx)
	if err != nil {
		return err
	}
	counted := time.Since(start)
	fmt.Printf("   RMAT scale 16: %d vertices, %d edges (max degree %d), built in %v; %d triangles, counted in %v\n",
		st.Vertices, st.Edges, st.MaxDegree, built.Round(time.Millisecond), before, counted.Round(time.Millisecond))
	// Delete the first 10,000 edges, insert them back: the count returns.
	k := 10_000
	res := make([]slabhash.Result, k)
	start = time.Now()
	if err := g.DeleteEdges(ctx, e.Src[:k], e.Dst[:k], res); err != nil {
		return err
	}
	removed := 0
	for _, r := range res {
		if r == slabhash.Removed {
			removed++
		}
	}
	mid, err := g.TriangleCount(ctx)
	if err != nil {
		return err
	}
	if err := g.InsertEdges(ctx, e.Src[:k], e.Dst[:k], res); err != nil {
		return err
	}
	after, err := g.TriangleCount(ctx)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%d triangles after deleting and reinserting edges, %d before", after, before)
	}
	if err := g.Rehash(ctx); err != nil {
		return err
	}
	if err := g.Check(ctx); err != nil {
		return err
	}
	st, err = g.Stats(ctx)
	if err != nil {
		return err
	}
	lists := "" // the CUDA backend's bucket lists (the CPU backend has none)
	if st.LongestList > 0 {
		lists = fmt.Sprintf(" (longest list %d slabs)", st.LongestList)
	}
	fmt.Printf("   deleted %d edges (%d were there): %d triangles; inserted them again: %d, as before (%v); rehashed%s; invariants hold\n",
		k, removed, mid, after, time.Since(start).Round(time.Millisecond), lists)
	return nil
}
