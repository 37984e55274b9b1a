package graph_test

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit/graph"
	"github.com/warpkit/warpkit/slabhash"
)

// An undirected graph: a square with one diagonal has two triangles; the
// other diagonal makes four.
func Example() {
	ctx := context.Background()
	g, err := graph.New(graph.Options{})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	if err := g.Build(ctx, []uint32{0, 1, 2, 3, 0}, []uint32{1, 2, 3, 0, 2}); err != nil {
		panic(err)
	}
	n, _ := g.TriangleCount(ctx)
	fmt.Println("triangles:", n)
	res := make([]slabhash.Result, 2)
	if err := g.InsertEdges(ctx, []uint32{1, 2}, []uint32{3, 0}, res); err != nil {
		panic(err)
	}
	n, _ = g.TriangleCount(ctx)
	fmt.Println("inserted:", res[0] == slabhash.Inserted, "present:", res[1] == slabhash.Present, "triangles:", n)
	deg := make([]uint32, 4)
	if err := g.Degrees(ctx, []uint32{0, 1, 2, 3}, deg); err != nil {
		panic(err)
	}
	fmt.Println("degrees:", deg)
	// Output:
	// triangles: 2
	// inserted: true present: true triangles: 4
	// degrees: [3 3 3 3]
}
