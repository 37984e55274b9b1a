// Package graph holds dynamic graphs: a vertex dictionary and, per vertex,
// a hash set of its neighbours (Graph) or a hash map of neighbours to edge
// weights (Weighted[W], W uint32 or uint64) — the structure of Awad's thesis,
// chapter 5 ("Dynamic Graphs on the GPU", IPDPS 2020) — with batched edge
// insertion and deletion, vertex deletion, queries, degrees, neighbour
// iteration, conversion to CSR and triangle counting. Design:
// shared/docs/specs/graph.md; graph/graphio reads and generates the graphs.
//
// # Use
//
//	g, err := graph.New(graph.Options{})                   // undirected
//	err = g.Build(ctx, src, dst)                           // from COO (or BuildCSR)
//	err = g.InsertEdges(ctx, src, dst, res)                // res: Inserted | Present | NotFound (self-loop skipped)
//	err = g.DeleteEdges(ctx, src, dst, res)                // Removed | NotFound
//	n, err := g.TriangleCount(ctx)
//
// # Semantics
//
// Vertex IDs are uint32 below the vertex capacity (Options.VertexCapacity,
// EnsureVertices, or what Build needs); 0xFFFFFFFF and 0xFFFFFFFE are
// reserved (the slab hash's sentinels). A batch holding a reserved ID fails
// with ErrReservedKey, one holding an ID at or past the capacity with
// ErrInvalidArgument, and neither applies anything. An undirected graph
// (the default) stores both directions of every edge and changes them
// together; a directed graph stores each edge from its source. A repeated
// edge is not stored twice: inserting it again is Present (a weighted
// graph takes the new weight; within one batch, the last). Self-loops are
// skipped and counted (Stats.SelfLoopsSkipped) unless AllowSelfLoops.
// Degrees are exact. Edge batches run concurrently and are linearizable per
// edge; Build, DeleteVertices, EnsureVertices, ToCSR, TriangleCount, Flush,
// Rehash, Check and Stats run alone. Counts and offsets are 64-bit.
//
// Triangle counting orients every edge from the endpoint ranked lower by
// (degree, ID) to the other — the degree-ordered orientation — and counts,
// for every oriented edge u→v, the common out-neighbours of u and v by
// sorted merge: each triangle once, in O(m^1.5).
//
// # Status
//
// Issue 17, in part: graph/graphio (readers, generators, stand-ins) and this
// package's CPU backend — the oracle of the CUDA backend to come, with the
// API and semantics above — are built and tested (differential against a
// model over random operation mixes, directed and undirected, weighted and
// not, self-loops kept or skipped; triangle counts against brute force on
// complete and RMAT graphs, after updates too; concurrent batches; the
// structure contract's errors). `warp graph tc` counts a file's triangles.
// Not built: the CUDA backend (per-vertex slab hashes sharing one bucket
// arena and one SlabAlloc pool through a locator policy in slabhash.cuh),
// its Device methods (today they answer ErrNeedsCUDA, as every CPU
// backend's do), the sorted-CSR baseline, `warp bench graph` and its
// tables.
//
// # Departures from the spec (shared/docs/specs/graph.md)
//
//   - Options have no Device, Streams, LoadFactor, Layout, MaxPoolBytes or
//     RehashChain yet: they configure the CUDA backend. Backend CUDA fails
//     with ErrInvalidArgument until it is built; Auto runs the CPU backend.
//   - The CPU backend's maps need no flush and no rehash: Flush and Rehash
//     are no-ops there.
//   - A skipped self-loop's insert result is NotFound (slabhash's Result has
//     no value for it).
//   - Len is the number of adjacency entries (the contract's live keys);
//     Stats has Entries and Edges (an undirected edge counted once).
//     NumEdges is Stats.Edges; there is no separate method.
//   - The weighted CSR is ToCSRWeights (the CSR and a weight per entry).
//   - TriangleCount needs an undirected graph (ErrInvalidArgument).
//   - The CPU backend checks the context when a call starts: its batches
//     apply whole (as lsm's and sortedarray's updates do), and a triangle
//     count stops between vertex ranges.
//   - Build sizes the vertex array to the largest ID + 1: an ID near 2^32
//     asks for tens of GB (16 bytes a vertex while it builds), with no
//     limit option yet.
package graph
