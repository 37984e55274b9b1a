package graph

import (
	"context"
	"fmt"
	"sync"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/gpurt"
	"github.com/warpkit/warpkit/prim"
)

// SortedCSR is an undirected graph on the device as a sorted CSR: the
// sorted-adjacency structure (the Hornet and faimGraph class) that warp bench
// graph measures the CUDA backend against. Its entries are 64-bit keys
// src<<32|dst, kept sorted and unique by prim (radix sort, merge path,
// selection); an insert batch is sorted and merged in (a merge-insert), and
// TriangleCount lays the rows out, orients them by (degree, ID) and looks
// each pair up by binary search (TrianglesSorted's kernels). It has no
// deletes and no CPU backend: it is a baseline, not a structure.
type SortedCSR struct {
	mu     sync.Mutex
	dev    *cuda.Device
	stream *cuda.Stream
	prim   *prim.Engine
	nv     int
	keys   cuda.Slice[uint64] // the entries, sorted, unique, no self-loops
	m      int
	ctrl   cuda.Slice[uint64]
	closed bool
	// The rows TriangleCount lays out, kept for the next count as the
	// graph's own are (a fair baseline: neither pays cuMemAlloc per count).
	tOff                gpurt.Buf[uint64]
	tCols, tRows, tOcnt gpurt.Buf[uint32]

	fPack, fUnique, fRows, fOrient, fTCSorted *cuda.Function
}

// NewSortedCSR builds a sorted CSR of the undirected edges (src[i], dst[i])
// (both directions stored; repeats and self-loops dropped) over vertices
// 0..vertices-1, on dev.
func NewSortedCSR(ctx context.Context, dev *cuda.Device, vertices int, src, dst cuda.Slice[uint32]) (*SortedCSR, error) {
	if vertices < 0 || vertices > ReservedTombstone || src.Len() != dst.Len() {
		return nil, fmt.Errorf("graph: sorted csr: %w: %d vertices, %d sources and %d destinations", warpkit.ErrInvalidArgument, vertices, src.Len(), dst.Len())
	}
	c := &SortedCSR{dev: dev, nv: vertices}
	fail := func(err error) (*SortedCSR, error) {
		c.Close()
		return nil, fmt.Errorf("graph: sorted csr: %w", err)
	}
	var err error
	if c.stream, err = dev.NewStream(); err != nil {
		return fail(err)
	}
	if c.prim, err = prim.NewEngine(dev); err != nil {
		return fail(err)
	}
	if c.ctrl, err = cuda.Alloc[uint64](dev, gpurt.CtrlWords); err != nil {
		return fail(err)
	}
	mod, err := dev.LoadModule(graphPTX)
	if err != nil {
		return fail(err)
	}
	for _, f := range []struct {
		dst  **cuda.Function
		name string
	}{{&c.fPack, "gr_pack"}, {&c.fUnique, "gr_unique"}, {&c.fRows, "gr_rows"}, {&c.fOrient, "gr_orient"}, {&c.fTCSorted, "gr_tc_sorted"}} {
		if *f.dst, err = mod.Function(f.name); err != nil {
			return fail(err)
		}
	}
	if err := c.Insert(ctx, src, dst); err != nil {
		return fail(err)
	}
	return c, nil
}

func (c *SortedCSR) launch(f *cuda.Function, items int64, args ...any) error {
	return f.Launch(gpurt.Grid(f, c.dev, items, gpuBlock, 2), cuda.D1(gpuBlock), 0, c.stream, args...)
}

// Len returns the entries stored (an edge counts twice).
func (c *SortedCSR) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m
}

// Insert merges undirected edges in: both directions packed, sorted, merged
// with the entries, repeats and self-loops dropped.
func (c *SortedCSR) Insert(ctx context.Context, src, dst cuda.Slice[uint32]) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("graph: sorted csr: %w", warpkit.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n := src.Len()
	if n != dst.Len() {
		return fmt.Errorf("graph: sorted csr: %w: %d sources, %d destinations", warpkit.ErrInvalidArgument, n, dst.Len())
	}
	if n == 0 {
		return nil
	}
	batch, err := cuda.Alloc[uint64](c.dev, 2*n)
	if err != nil {
		return err
	}
	defer batch.Free()
	if err := c.launch(c.fPack, int64(n), src, dst, uint64(n), uint32(1), batch); err != nil {
		return waitAfter(c.stream, err)
	}
	if err := prim.SortKeys(c.prim, c.stream, batch, prim.SortOptions{}); err != nil {
		return waitAfter(c.stream, err)
	}
	merged := batch
	if c.m > 0 {
		if merged, err = cuda.Alloc[uint64](c.dev, c.m+2*n); err != nil {
			return waitAfter(c.stream, err)
		}
		defer merged.Free()
		if err := prim.MergeKeys(c.prim, c.stream, c.keys.Sub(0, c.m), batch, merged, prim.MergeOptions[uint64]{}); err != nil {
			return waitAfter(c.stream, err)
		}
	}
	total := merged.Len()
	flags, err := cuda.Alloc[uint8](c.dev, total)
	if err != nil {
		return waitAfter(c.stream, err)
	}
	defer flags.Free()
	out, err := cuda.Alloc[uint64](c.dev, total)
	if err != nil {
		return waitAfter(c.stream, err)
	}
	count, err := cuda.Alloc[uint32](c.dev, 1)
	if err != nil {
		out.Free()
		return waitAfter(c.stream, err)
	}
	defer count.Free()
	if err := c.launch(c.fUnique, int64(total), merged, uint64(total), flags); err != nil {
		out.Free()
		return waitAfter(c.stream, err)
	}
	if err := prim.SelectFlagged(c.prim, c.stream, merged, flags, out, count); err != nil {
		out.Free()
		return waitAfter(c.stream, err)
	}
	if err := gpurt.Wait(c.stream); err != nil {
		out.Free()
		return err
	}
	var m [1]uint32
	if err := count.CopyToHost(m[:]); err != nil {
		out.Free()
		return err
	}
	c.keys.Free()
	c.keys, c.m = out, int(m[0])
	return nil
}

// sortedPairLoop picks gr_tc_sorted's pair loop for a graph of entries
// over vertices: 8-lane tiles per entry (tiled = 1) from a mean of 16
// entries a vertex, where they measured faster for binary searches, the
// warp's even deal below. It returns the flag and the threads to launch.
func sortedPairLoop(entries uint64, vertices int) (tiled uint32, items int64) {
	if vertices > 0 && entries >= 16*uint64(vertices) {
		return 1, tiles(int(entries))
	}
	return 0, int64(entries)
}

// TriangleCount counts the triangles: the rows laid out from the keys,
// oriented by (degree, ID), each pair of an oriented row looked up by
// binary search.
func (c *SortedCSR) TriangleCount(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("graph: sorted csr: %w", warpkit.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if c.m == 0 {
		return 0, nil
	}
	off, err := c.tOff.Get(c.dev, c.stream, c.nv+1)
	if err != nil {
		return 0, err
	}
	cols, err := c.tCols.Get(c.dev, c.stream, c.m)
	if err != nil {
		return 0, err
	}
	rows, err := c.tRows.Get(c.dev, c.stream, c.m)
	if err != nil {
		return 0, err
	}
	ocnt, err := c.tOcnt.Get(c.dev, c.stream, max(1, c.nv))
	if err != nil {
		return 0, err
	}
	if err := c.ctrl.Zero(c.stream); err != nil {
		return 0, waitAfter(c.stream, err)
	}
	if err := c.launch(c.fRows, int64(c.m+1), c.keys, uint64(c.m), uint64(c.nv), off, cols, rows); err != nil {
		return 0, waitAfter(c.stream, err)
	}
	// orient ranks by row lengths (no dictionary): the rows as laid out,
	// before it cuts them.
	if err := c.launch(c.fOrient, int64(c.nv), off, cols, cuda.DevicePtr(0), uint64(c.nv), ocnt); err != nil {
		return 0, waitAfter(c.stream, err)
	}
	tiled, items := sortedPairLoop(uint64(c.m), c.nv)
	if err := c.launch(c.fTCSorted, items, off, cols, rows, ocnt, uint64(c.m), uint64(c.nv), cuda.DevicePtr(0), tiled, c.ctrl); err != nil {
		return 0, waitAfter(c.stream, err)
	}
	if err := gpurt.Wait(c.stream); err != nil {
		return 0, err
	}
	var n [1]uint64
	err = c.ctrl.Sub(0, 1).CopyToHost(n[:])
	return n[0], err
}

// Close frees the device memory; later calls return ErrClosed.
func (c *SortedCSR) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("graph: sorted csr: %w", warpkit.ErrClosed)
	}
	c.closed = true
	c.keys.Free()
	c.ctrl.Free()
	if c.prim != nil {
		c.prim.Close()
	}
	if c.stream != nil {
		c.stream.Close() // waits for the work queued on it
	}
	gpurt.FreeAll(c)
	return nil
}
