package kv

import (
	"bytes"
	"fmt"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/batchrepr"
	"github.com/warpkit/warpkit/kv/internal/memtable"
)

// Batch limits: a batch becomes one log record and goes into one memtable.
// Variables so that tests can lower them.
var (
	// maxBatchSize bounds an encoded batch, and so a key with its value.
	maxBatchSize = 1 << 30
	// maxMemTableCapacity bounds a memtable's arena, which a batch's
	// entries (memtable.NeededBytes) must fit.
	maxMemTableCapacity = memtable.MaxCapacity
)

// maxBatchMemory is the most memtable bytes (memtable.NeededBytes) one
// commit group may need: what the largest memtable holds besides its
// skiplist heads.
func maxBatchMemory() int64 { return int64(maxMemTableCapacity - memtable.MinCapacity) }

// Batch is an atomic group of writes: Commit applies all of them or none,
// and readers see all of them or none. A Batch copies the keys and values
// given to it. It is not safe for concurrent use; after Commit it may be
// Reset and reused.
type Batch struct {
	db        *DB
	repr      []byte
	count     uint32
	committed bool
}

// NewBatch returns an empty batch for this DB.
func (d *DB) NewBatch() *Batch {
	return &Batch{db: d, repr: make([]byte, batchrepr.HeaderLen, 256)}
}

func (b *Batch) init() {
	if len(b.repr) < batchrepr.HeaderLen {
		b.repr = append(b.repr[:0], make([]byte, batchrepr.HeaderLen)...)
	}
}

func (b *Batch) add(kind base.Kind, key, value []byte) {
	b.init()
	b.repr = batchrepr.AppendEntry(b.repr, kind, key, value)
	b.count++
}

// Set records key = value.
func (b *Batch) Set(key, value []byte) { b.add(base.KindSet, key, value) }

// Delete records a deletion of key.
func (b *Batch) Delete(key []byte) { b.add(base.KindDelete, key, nil) }

// DeleteRange records a deletion of every key in [start, end). An empty
// range (start >= end) deletes nothing and is not recorded (it does not
// count in Count).
func (b *Batch) DeleteRange(start, end []byte) {
	if bytes.Compare(start, end) >= 0 {
		return
	}
	b.add(base.KindRangeDelete, start, end)
}

// Count returns the number of operations in the batch.
func (b *Batch) Count() int { return int(b.count) }

// Size returns the batch's encoded size in bytes.
func (b *Batch) Size() int { return len(b.repr) }

// Empty reports whether the batch holds no operations.
func (b *Batch) Empty() bool { return b.count == 0 }

// Reset empties the batch for reuse, keeping its buffer.
func (b *Batch) Reset() {
	b.repr = b.repr[:0]
	b.init()
	b.count = 0
	b.committed = false
}

// Commit applies the batch atomically. With opts.Sync it is durable when
// Commit returns. A batch can be committed once; Reset it to reuse it.
func (b *Batch) Commit(opts *WriteOptions) error {
	if b.db == nil {
		return fmt.Errorf("%w: batch not made by DB.NewBatch", ErrInvalidArgument)
	}
	return b.db.Apply(b, opts)
}

// prepare checks the batch before it is logged.
func (b *Batch) prepare() error {
	if b.committed {
		return fmt.Errorf("%w: batch already committed (Reset it to reuse)", ErrInvalidArgument)
	}
	if len(b.repr) > maxBatchSize {
		return fmt.Errorf("%w: batch of %d bytes exceeds %d", ErrInvalidArgument, len(b.repr), maxBatchSize)
	}
	if need := memtable.NeededBytes(len(b.repr), b.count); need > maxBatchMemory() {
		return fmt.Errorf("%w: batch of %d entries needs %d bytes of memtable, more than the %d a memtable holds",
			ErrInvalidArgument, b.count, need, maxBatchMemory())
	}
	b.init()
	batchrepr.SetCount(b.repr, b.count)
	return nil
}
