package graph

import (
	"context"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/front"
	"github.com/warpkit/warpkit/internal/gpurt"
)

// The device-resident methods (the CUDA backend; ErrNeedsCUDA on the CPU
// backend). Their IDs are checked on the device before anything applies: an
// ID at or past the vertex capacity fails the call with ErrInvalidArgument.
// Results are slabhash.Result codes, one byte each.

// gpu returns the CUDA backend, or the front's answer for op.
func (g *base[W]) gpu(op string) (*gpuGraph[W], error) {
	if err := g.f.Device(op); err != nil {
		return nil, err
	}
	return g.e.(*gpuGraph[W]), nil
}

// deviceBatch runs f on the CUDA backend under the front (mode) and the
// backend's batch lock, after checking the batch's lengths: every slice of
// lens has n elements (a slice not given has length -1 and is skipped).
func (g *base[W]) deviceBatch(ctx context.Context, op string, mode front.Mode, n int, lens []int, f func(gg *gpuGraph[W]) error) error {
	gg, err := g.gpu(op)
	if err != nil {
		return err
	}
	for _, l := range lens {
		if l >= 0 && l != n {
			return g.f.Errorf(op, "slices of different lengths (%d and %d)", n, l)
		}
	}
	return g.f.Do(ctx, op, mode, func() error {
		gg.mu.Lock()
		defer gg.mu.Unlock()
		return f(gg)
	})
}

// optLen is the length of an optional device slice (-1 when not given).
func optLen[T cuda.Elem](s cuda.Slice[T]) int {
	if s.Buffer() == nil {
		return -1
	}
	return s.Len()
}

// InsertEdgesDevice is InsertEdges with device-resident slices; res
// (optional) gets each edge's result.
func (g *Graph) InsertEdgesDevice(ctx context.Context, src, dst cuda.Slice[uint32], res cuda.Slice[uint8]) error {
	return g.deviceBatch(ctx, "insert edges device", front.Shared, src.Len(), []int{dst.Len(), optLen(res)}, func(gg *gpuGraph[struct{}]) error {
		return gg.edges(ctx, opInsert, src, dst, 0, res, true)
	})
}

// InsertEdgesDevice is InsertEdges with device-resident slices.
func (g *Weighted[W]) InsertEdgesDevice(ctx context.Context, src, dst cuda.Slice[uint32], w cuda.Slice[W], res cuda.Slice[uint8]) error {
	return g.deviceBatch(ctx, "insert edges device", front.Shared, src.Len(), []int{dst.Len(), w.Len(), optLen(res)}, func(gg *gpuGraph[W]) error {
		if src.Len() == 0 {
			return nil
		}
		// The weights are copied: an undirected insert writes the weights
		// that won over its scratch copy (applyPrepared).
		ws, err := gg.vals(&gg.bVals, src.Len())
		if err != nil {
			return err
		}
		if err := copyBytes(gg, ws, w); err != nil {
			return err
		}
		return gg.edges(ctx, opInsert, src, dst, ws.Ptr(), res, true)
	})
}

// DeleteEdgesDevice is DeleteEdges with device-resident slices.
func (g *base[W]) DeleteEdgesDevice(ctx context.Context, src, dst cuda.Slice[uint32], res cuda.Slice[uint8]) error {
	return g.deviceBatch(ctx, "delete edges device", front.Shared, src.Len(), []int{dst.Len(), optLen(res)}, func(gg *gpuGraph[W]) error {
		return gg.edges(ctx, opDelete, src, dst, 0, res, true)
	})
}

// HasEdgesDevice is HasEdges with device-resident slices (found: 1 or 0).
func (g *base[W]) HasEdgesDevice(ctx context.Context, src, dst cuda.Slice[uint32], found cuda.Slice[uint8]) error {
	return g.deviceBatch(ctx, "has edges device", front.Shared, src.Len(), []int{dst.Len(), found.Len()}, func(gg *gpuGraph[W]) error {
		if src.Len() == 0 {
			return nil
		}
		return gg.find(ctx, src, dst, 0, found, true)
	})
}

// DegreesDevice is Degrees with device-resident slices.
func (g *base[W]) DegreesDevice(ctx context.Context, ids, out cuda.Slice[uint32]) error {
	return g.deviceBatch(ctx, "degrees device", front.Shared, ids.Len(), []int{out.Len()}, func(gg *gpuGraph[W]) error {
		if ids.Len() == 0 {
			return nil
		}
		if err := gg.checkIDs(ids, cuda.Slice[uint32]{}); err != nil {
			return err
		}
		return gg.degreesDevice(ids, out)
	})
}

// NeighborsDevice writes the neighbours of ids[i] (in no order) to
// out[offsets[i]:offsets[i+1]] — the windows a DegreesDevice and a scan
// give (len(offsets) = len(ids)+1). A window that decreases or passes the
// end of out is left empty, and one smaller than its vertex's degree gets
// its first neighbours; either fails the call with ErrInvalidArgument, the
// other windows written.
func (g *base[W]) NeighborsDevice(ctx context.Context, ids cuda.Slice[uint32], offsets cuda.Slice[uint64], out cuda.Slice[uint32]) error {
	return g.deviceBatch(ctx, "neighbors device", front.Shared, ids.Len(), []int{offsets.Len() - 1}, func(gg *gpuGraph[W]) error {
		if ids.Len() == 0 {
			return nil
		}
		return gg.neighborsDevice(ids, offsets, out)
	})
}

// DeleteVerticesDevice is DeleteVertices with a device-resident slice.
func (g *base[W]) DeleteVerticesDevice(ctx context.Context, ids cuda.Slice[uint32]) error {
	return g.deviceBatch(ctx, "delete vertices device", front.Exclusive, ids.Len(), nil, func(gg *gpuGraph[W]) error {
		if ids.Len() == 0 {
			return nil
		}
		if err := gg.checkIDs(ids, cuda.Slice[uint32]{}); err != nil {
			return err
		}
		return gg.deleteVerticesDevice(ctx, ids)
	})
}

// BuildDevice replaces the graph's edges with device-resident edges
// (src[i], dst[i]) over vertices IDs 0..vertices-1 (an ID past them fails
// the call with ErrInvalidArgument and leaves the graph as it was).
func (g *Graph) BuildDevice(ctx context.Context, vertices int, src, dst cuda.Slice[uint32]) error {
	return g.deviceBatch(ctx, "build device", front.Exclusive, src.Len(), []int{dst.Len()}, func(gg *gpuGraph[struct{}]) error {
		return gg.buildChecked(ctx, vertices, src, dst, 0)
	})
}

// BuildDevice is Graph.BuildDevice with weights.
func (g *Weighted[W]) BuildDevice(ctx context.Context, vertices int, src, dst cuda.Slice[uint32], w cuda.Slice[W]) error {
	return g.deviceBatch(ctx, "build device", front.Exclusive, src.Len(), []int{dst.Len(), w.Len()}, func(gg *gpuGraph[W]) error {
		ws, err := gg.vals(&gg.bVals, src.Len())
		if err != nil {
			return err
		}
		if err := copyBytes(gg, ws, w); err != nil {
			return err
		}
		return gg.buildChecked(ctx, vertices, src, dst, ws.Ptr())
	})
}

// copyBytes copies the device slice src into dst (at least as many bytes),
// waiting for the copy.
func copyBytes[T cuda.Elem, W any](gg *gpuGraph[W], dst cuda.Slice[uint8], src cuda.Slice[T]) error {
	if src.Len() == 0 {
		return nil
	}
	view, err := cuda.View[uint8](src.Buffer(), int(src.Ptr()-src.Buffer().Ptr()), int(src.Bytes()))
	if err != nil {
		return err
	}
	if err := cuda.CopyAsync(dst.Sub(0, view.Len()), view, gg.stream); err != nil {
		return waitAfter(gg.stream, err)
	}
	return gpurt.Wait(gg.stream)
}
