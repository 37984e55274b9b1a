// Package oahash is the baseline the slab hash benchmarks measure against in
// the same run: a static open-addressing GPU hash table for 32-bit keys and
// values, one 8-byte slot per pair, linear probing, one thread per
// operation (the "one-probe" table of the slab hash issue). It supports bulk
// insert (insert or replace) and find on device-resident batches, and mixed
// batches whose deletes leave tombstones (Apply); it cannot grow or reclaim
// tombstones, which is what makes it the static yardstick. Keys 0xffffffff
// (empty) and 0xfffffffe (deleted) are not allowed.
//
// Each call runs on the table's own stream and waits the way the slab hash
// does (gpurt.Wait, which polls), with no more driver calls than it needs,
// so that per-call costs neither flatter nor burden the slab hash.
package oahash

import (
	"errors"
	"fmt"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/errs"
	"github.com/warpkit/warpkit/internal/gpurt"
)

// Absent is the value Find reports for a missing key.
const Absent uint32 = 0xffffffff

const seed = 0x2545f491 // the slab hash's default seed: the same hash

// Table is a static open-addressing table.
type Table struct {
	dev      *cuda.Device
	slots    cuda.Slice[uint64]
	status   cuda.Slice[uint32]
	hStatus  *cuda.Pinned[uint32]
	stream   *cuda.Stream
	fInsert  *cuda.Function
	fFind    *cuda.Function
	fApply   *cuda.Function
	capacity int
}

// New allocates a table of capacity slots (8 bytes each), all empty.
func New(dev *cuda.Device, capacity int) (*Table, error) {
	if capacity < 1 || capacity > 1<<32-1 {
		return nil, fmt.Errorf("%w: oahash: capacity %d", errs.ErrInvalidArgument, capacity)
	}
	mod, err := dev.LoadModule(oahashPTX)
	if err != nil {
		return nil, err
	}
	t := &Table{dev: dev, capacity: capacity}
	if t.fInsert, err = mod.Function("oa_insert"); err != nil {
		return nil, err
	}
	if t.fFind, err = mod.Function("oa_find"); err != nil {
		return nil, err
	}
	if t.fApply, err = mod.Function("oa_apply"); err != nil {
		return nil, err
	}
	if t.slots, err = cuda.Alloc[uint64](dev, capacity); err != nil {
		return nil, err
	}
	if t.status, err = cuda.Alloc[uint32](dev, 1); err != nil {
		t.slots.Free()
		return nil, err
	}
	if t.hStatus, err = cuda.AllocPinned[uint32](dev, 1); err != nil {
		t.Close()
		return nil, err
	}
	if t.stream, err = dev.NewStream(); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.Clear(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Clear empties the table.
func (t *Table) Clear() error {
	if err := t.slots.FillBytes(0xff, t.stream); err != nil {
		return err
	}
	return gpurt.Wait(t.stream)
}

// Insert inserts (or replaces) the pairs and waits for the kernel. A table
// too full to take a key returns ErrRetryLimit.
func (t *Table) Insert(keys, vals cuda.Slice[uint32]) error {
	n := keys.Len()
	if vals.Len() != n {
		return fmt.Errorf("%w: oahash: %d values for %d keys", errs.ErrInvalidArgument, vals.Len(), n)
	}
	if n == 0 {
		return nil
	}
	if err := t.status.Zero(t.stream); err != nil {
		return err
	}
	if err := t.fInsert.Launch(cuda.GridFor(n, 256), cuda.D1(256), 0, t.stream, t.slots, uint32(t.capacity), uint32(seed), keys, vals, uint64(n), t.status); err != nil {
		return err
	}
	return t.finish("oahash: insert")
}

// finish copies the status word back behind the kernel, waits, and maps it.
func (t *Table) finish(what string) error {
	if err := cuda.CopyToHostAsync(t.hStatus, 0, t.status, t.stream); err != nil {
		return err
	}
	if err := gpurt.Wait(t.stream); err != nil {
		return err
	}
	return gpurt.StatusError(what, t.hStatus.Data()[0])
}

// Apply runs a mixed batch in one kernel: ops[i] is 0 (find: vals[i]
// receives the value), 1 (insert or replace vals[i]) or 2 (delete);
// results[i] receives the slab hash's result code (0 not found, 1 found,
// 2 inserted, 3 present, 4 removed). Deletes leave tombstones. Op codes are
// not checked (this is a benchmark baseline).
func (t *Table) Apply(ops cuda.Slice[uint8], keys, vals cuda.Slice[uint32], results cuda.Slice[uint8]) error {
	n := keys.Len()
	if ops.Len() != n || vals.Len() != n || results.Len() != n {
		return fmt.Errorf("%w: oahash: apply: %d ops, %d values, %d results for %d keys", errs.ErrInvalidArgument, ops.Len(), vals.Len(), results.Len(), n)
	}
	if n == 0 {
		return nil
	}
	if err := t.status.Zero(t.stream); err != nil {
		return err
	}
	if err := t.fApply.Launch(cuda.GridFor(n, 256), cuda.D1(256), 0, t.stream, t.slots, uint32(t.capacity), uint32(seed), ops, keys, vals, results, uint64(n), t.status); err != nil {
		return err
	}
	return t.finish("oahash: apply")
}

// Find stores each key's value in vals (Absent if missing) and waits.
func (t *Table) Find(keys, vals cuda.Slice[uint32]) error {
	n := keys.Len()
	if vals.Len() != n {
		return fmt.Errorf("%w: oahash: %d values for %d keys", errs.ErrInvalidArgument, vals.Len(), n)
	}
	if n == 0 {
		return nil
	}
	if err := t.fFind.Launch(cuda.GridFor(n, 256), cuda.D1(256), 0, t.stream, t.slots, uint32(t.capacity), uint32(seed), keys, vals, uint64(n)); err != nil {
		return err
	}
	return gpurt.Wait(t.stream)
}

// Close frees the table.
func (t *Table) Close() error {
	var errs []error
	if t.stream != nil {
		errs = append(errs, t.stream.Close())
	}
	if t.hStatus != nil {
		errs = append(errs, t.hStatus.Free())
	}
	errs = append(errs, t.slots.Free(), t.status.Free())
	return errors.Join(errs...)
}
