package kv

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/warpkit/warpkit/kv/vfs"
)

// flushGateMaxWait bounds how long a compaction's write waits for flushes
// (flushGate.wait), so that back-to-back flushes cannot starve compactions.
const flushGateMaxWait = 20 * time.Millisecond

// flushGate gives memtable flushes the disk before compactions' outputs.
// A flush writes and syncs a table that writers may be waiting for (a full
// memtable stalls them), while a compaction's outputs are wanted only once L0
// fills: a compaction that writes fast (kv/gpucompact's) otherwise keeps the
// disk busy with its dirty pages while the flush's sync waits behind them.
// While a flush holds the gate (from its table's creation to its manifest
// edit; only flushes that start with L0 below its compaction threshold, when
// no compaction is urgent, hold it), compactions' output files wait before
// each write and sync, up to flushGateMaxWait each time.
type flushGate struct {
	held  atomic.Int32 // flushes holding the gate
	mu    sync.Mutex
	clear chan struct{} // closed when held drops to 0
}

func (g *flushGate) enter() {
	g.mu.Lock()
	if g.held.Add(1) == 1 {
		g.clear = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *flushGate) exit() {
	g.mu.Lock()
	if g.held.Add(-1) == 0 {
		close(g.clear)
	}
	g.mu.Unlock()
}

// wait returns once no flush holds the gate, or after flushGateMaxWait.
func (g *flushGate) wait() {
	if g.held.Load() == 0 {
		return
	}
	g.mu.Lock()
	if g.held.Load() == 0 {
		g.mu.Unlock()
		return
	}
	ch := g.clear
	g.mu.Unlock()
	t := time.NewTimer(flushGateMaxWait)
	select {
	case <-ch:
	case <-t.C:
	}
	t.Stop()
}

// gatedFile is a compaction output's file: each write and sync first waits
// at the gate.
type gatedFile struct {
	vfs.File
	g *flushGate
}

func (f *gatedFile) Write(p []byte) (int, error) {
	f.g.wait()
	return f.File.Write(p)
}

func (f *gatedFile) Sync() error {
	f.g.wait()
	return f.File.Sync()
}

// gatedVectorFile is a gatedFile over a vfs.VectorWriter.
type gatedVectorFile struct {
	*gatedFile
	vw vfs.VectorWriter
}

func (f gatedVectorFile) WriteVectors(bufs [][]byte) (int64, error) {
	f.g.wait()
	return f.vw.WriteVectors(bufs)
}

// gated returns f with its writes and syncs behind the gate (a
// vfs.VectorWriter stays one).
func (g *flushGate) gated(f vfs.File) vfs.File {
	gf := &gatedFile{File: f, g: g}
	if vw, ok := f.(vfs.VectorWriter); ok {
		return gatedVectorFile{gf, vw}
	}
	return gf
}
