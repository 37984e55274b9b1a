package gpucompact

import "unsafe"

// workspace holds the Go engine's large arrays between jobs, so that a job
// after the first reuses memory the process already has: fresh memory
// costs a page fault and the kernel's zeroing per 4 KiB page, which on
// many cores cost more than the stages' own work (docs/benchmarks.md, the
// kernel's share of the engine's CPU time). It is the Go engine's
// counterpart of the CUDA engine's staging ring, allocated once.
//
// Arrays handed out keep whatever the last job left in them: every stage
// writes each element it later reads. A Compactor keeps one workspace (its
// engine runs one job at a time) until Close.
type workspace struct {
	regions         []byte  // input blocks as stored, each piece's in turn
	arena           []byte  // input blocks' contents
	pieceKeys, keys []byte  // user keys: per load piece, then gathered
	pieceEnts, ents []entry // entries: per load piece, then gathered
	src, dst        []uint32
	flags           []bool // gc: keep, newKey and elided, n each
	kept            []uint32
	keptNew         []bool
	plan            []planEntry
	raw, sealed     []byte        // output blocks: contents, compressed
	hashes          []uint32      // output blocks' bloom hashes
	chunks          []*blockChunk // planned blocks (pipeline)
}

// take returns (*buf)[:n], replacing the array by a larger one (its
// contents not kept) when it is too short.
func take[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n, n+n/8) // room for a slightly larger next job
	}
	return (*buf)[:n]
}

// bytes is the memory the workspace holds.
func (w *workspace) bytes() int {
	const entrySize, planSize = 32, 8
	return cap(w.regions) + cap(w.arena) + cap(w.pieceKeys) + cap(w.keys) +
		entrySize*(cap(w.pieceEnts)+cap(w.ents)) + 4*(cap(w.src)+cap(w.dst)+cap(w.kept)+cap(w.hashes)) +
		cap(w.flags) + cap(w.keptNew) + planSize*cap(w.plan) + cap(w.raw) + cap(w.sealed) +
		len(w.chunks)*int(unsafe.Sizeof(blockChunk{}))
}
