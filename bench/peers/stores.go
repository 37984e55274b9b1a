package main

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	badger "github.com/dgraph-io/badger/v4"
	boptions "github.com/dgraph-io/badger/v4/options"
	"github.com/syndtr/goleveldb/leveldb"
	lerrors "github.com/syndtr/goleveldb/leveldb/errors"
	lfilter "github.com/syndtr/goleveldb/leveldb/filter"
	lopt "github.com/syndtr/goleveldb/leveldb/opt"
	lutil "github.com/syndtr/goleveldb/leveldb/util"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/gpucompact"
	"github.com/warpkit/warpkit/kv/kvbench"
	wsst "github.com/warpkit/warpkit/kv/sstable"
)

func openWarpkit(dir string, s settings) (kvbench.Store, error) {
	return openWarpkitWithCompactor(dir, s, false, nil)
}

// openWarpkitStatic opens warpkit with LevelDB's level geometry
// (kv.Options.StaticLevelSizes), for same-run comparisons with its default.
func openWarpkitStatic(dir string, s settings) (kvbench.Store, error) {
	return openWarpkitWithCompactor(dir, s, true, nil)
}

// openWarpkitGPU opens warpkit with kv/gpucompact as its compactor (jobs
// of 1 MiB and more on its CUDA engine, 8 MiB on its Go engine), for
// same-run comparisons with compaction.CPU.
func openWarpkitGPU(dir string, s settings) (kvbench.Store, error) {
	dev, err := gpuDevice()
	if err != nil {
		return nil, err
	}
	gc, err := gpucompact.New(gpucompact.Options{Device: dev})
	if err != nil {
		return nil, err
	}
	st, err := openWarpkitWithCompactor(dir, s, false, gc)
	if err != nil {
		gc.Close()
		return nil, err
	}
	return &closingStore{Store: st, after: gc.Close}, nil
}

// gpuDevice opens the device once for every warpkit-gpu store of the run
// (its kernels are loaded once per device; it stays open until the process
// ends); nil where there is none: gpucompact then runs its Go engine.
var gpuDevice = sync.OnceValues(func() (*cuda.Device, error) {
	return warpkit.OpenDevice(warpkit.Auto, 0)
})

// closingStore closes something after its store (a compactor).
type closingStore struct {
	kvbench.Store
	after func() error
}

func (c *closingStore) Close() error {
	err := c.Store.Close()
	if aerr := c.after(); err == nil {
		err = aerr
	}
	return err
}

// Report implements kvbench.Reporter when the store does.
func (c *closingStore) Report() string {
	if r, ok := c.Store.(kvbench.Reporter); ok {
		return r.Report()
	}
	return ""
}

func openWarpkitWithCompactor(dir string, s settings, static bool, c compaction.Compactor) (kvbench.Store, error) {
	o := &kv.Options{
		StaticLevelSizes:         static,
		MemTableSize:             int(s.memTable),
		TargetFileSize:           s.tableSize,
		L0CompactionThreshold:    s.l0Trigger,
		L0StopWritesThreshold:    s.l0Stop,
		LBaseMaxBytes:            s.lbase,
		BlockSize:                s.blockSize,
		BloomBitsPerKey:          s.bloomBits,
		BlockCacheSize:           s.cacheSize,
		MaxConcurrentCompactions: s.compactions,
	}
	if s.parts > 0 {
		o.Compactor = compaction.CPU{Parts: s.parts}
	}
	if c != nil {
		o.Compactor = c
	}
	if s.compression == "none" {
		o.DisableCompression = true
	} else {
		o.Compression = wsst.SnappyCompression
	}
	if s.trace != nil {
		name := "warpkit"
		switch {
		case static:
			name = "warpkit-static"
		case c != nil:
			name = "warpkit-gpu"
		}
		tr := s.trace.start(name)
		size := func(t kv.TableInfo) uint64 { return t.Size }
		o.EventListener = &kv.EventListener{
			FlushEnd:        func(fi kv.FlushInfo) { tr.flush(fi.InputBytes, fi.Duration, fi.Err) },
			WriteStallBegin: func(si kv.WriteStallBeginInfo) { tr.stall(si.Reason) },
			WriteStallEnd:   func() { tr.stall("") },
		}
		o.EventListener.CompactionEnd = func(ci kv.CompactionInfo) {
			var in []traceLevel
			for _, l := range ci.Input {
				in = append(in, levelOf(l.Level, l.Tables, size))
			}
			out := levelOf(ci.OutputLevel, ci.Output, size).bytes
			note := ""
			switch {
			case ci.Err != nil:
				note = "failed"
			case ci.Move:
				note = "move"
			}
			tr.compaction(in, ci.OutputLevel, out, note)
		}
	}
	db, err := kv.Open(dir, o)
	if err != nil {
		return nil, err
	}
	return kvbench.NewKVStore(db, s.sync), nil
}

// pebbleStore adapts Pebble.
type pebbleStore struct {
	db     *pebble.DB
	wo     *pebble.WriteOptions
	stalls atomic.Int64
	// stallStart is when the stall in progress began (0: none);
	// stallNanos the total of the ended ones.
	stallStart, stallNanos atomic.Int64
}

func openPebble(dir string, s settings) (kvbench.Store, error) {
	cache := pebble.NewCache(s.cacheSize)
	defer cache.Unref()
	o := &pebble.Options{
		MemTableSize:          uint64(s.memTable),
		L0CompactionThreshold: s.l0Trigger,
		L0StopWritesThreshold: s.l0Stop,
		LBaseMaxBytes:         s.lbase,
		Cache:                 cache,
		Logger:                quietLogger{},
	}
	for i := range o.TargetFileSizes {
		o.TargetFileSizes[i] = s.tableSize
	}
	for i := range o.Levels {
		o.Levels[i].BlockSize = s.blockSize
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(s.bloomBits)
		if s.compression == "none" {
			o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		} else {
			o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.SnappyCompression }
		}
	}
	ps := &pebbleStore{wo: pebble.NoSync}
	if s.sync {
		ps.wo = pebble.Sync
	}
	o.EventListener = &pebble.EventListener{
		WriteStallBegin: func(pebble.WriteStallBeginInfo) {
			ps.stalls.Add(1)
			ps.stallStart.Store(time.Now().UnixNano())
		},
		WriteStallEnd: func() {
			if t0 := ps.stallStart.Swap(0); t0 != 0 {
				ps.stallNanos.Add(time.Now().UnixNano() - t0)
			}
		},
	}
	if s.trace != nil {
		tr := s.trace.start("pebble")
		size := func(t pebble.TableInfo) uint64 { return t.Size }
		o.EventListener.CompactionEnd = func(ci pebble.CompactionInfo) {
			var in []traceLevel
			for _, l := range ci.Input {
				in = append(in, levelOf(l.Level, l.Tables, size))
			}
			out := levelOf(ci.Output.Level, ci.Output.Tables, size).bytes
			note := ci.Reason
			if ci.Err != nil {
				note += " failed"
			}
			tr.compaction(in, ci.Output.Level, out, note)
		}
		o.EventListener.FlushEnd = func(fi pebble.FlushInfo) { tr.flush(fi.InputBytes, fi.Duration, fi.Err) }
		begin, end := o.EventListener.WriteStallBegin, o.EventListener.WriteStallEnd
		o.EventListener.WriteStallBegin = func(si pebble.WriteStallBeginInfo) {
			begin(si)
			tr.stall(si.Reason)
		}
		o.EventListener.WriteStallEnd = func() {
			end()
			tr.stall("")
		}
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	ps.db = db
	return ps, nil
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(errors.New("pebble fatal"))
}

func (p *pebbleStore) Name() string          { return "pebble" }
func (p *pebbleStore) Set(k, v []byte) error { return p.db.Set(k, v, p.wo) }
func (p *pebbleStore) Delete(k []byte) error { return p.db.Delete(k, p.wo) }
func (p *pebbleStore) Get(k []byte) (int, bool, error) {
	v, closer, err := p.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n := len(v)
	return n, true, closer.Close()
}
func (p *pebbleStore) Scan(start []byte, n int) (int, int64, error) {
	it, err := p.db.NewIter(nil)
	if err != nil {
		return 0, 0, err
	}
	c := 0
	var b int64
	var ok bool
	if start == nil {
		ok = it.First()
	} else {
		ok = it.SeekGE(start)
	}
	for ; ok && (n < 0 || c < n); ok = it.Next() {
		b += int64(len(it.Key()) + len(it.Value()))
		c++
	}
	return c, b, it.Close()
}

// Settle waits until no flush or compaction has run for 200 ms (Pebble's
// estimated debt need not reach zero when nothing is due).
func (p *pebbleStore) Settle() error {
	var prev int64 = -1
	quiet := 0
	waitUntil(func() bool {
		m := p.db.Metrics()
		n := m.Compact.Count + m.Flush.Count
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 && n == prev {
			quiet++
		} else {
			quiet = 0
		}
		prev = n
		return quiet >= 10
	})
	return nil
}
func (p *pebbleStore) Stats() kvbench.StoreStats {
	m := p.db.Metrics()
	t := m.Total()
	var st kvbench.StoreStats
	if m.WAL.BytesIn > 0 {
		// Total() counts the WAL's bytes into TableBytesFlushed (as the
		// total's TableBytesIn); adding WAL.BytesWritten again would count
		// them twice.
		st.WriteAmp = float64(t.TableBytesFlushed+t.TableBytesCompacted) / float64(m.WAL.BytesIn)
	}
	st.CompactionBytes = int64(t.TableBytesRead + t.TableBytesCompacted)
	if d := m.Compact.Duration.Seconds(); d > 0 {
		st.CompactionBandwidth = float64(st.CompactionBytes) / d
	}
	st.Stalls = p.stalls.Load()
	st.StallTime = time.Duration(p.stallNanos.Load())
	return st
}
func (p *pebbleStore) Close() error { return p.db.Close() }

// Report implements kvbench.Reporter.
func (p *pebbleStore) Report() string { return p.db.Metrics().String() }

// levelStore adapts goleveldb.
type levelStore struct {
	db      *leveldb.DB
	wo      *lopt.WriteOptions
	written atomic.Int64 // user bytes, for write amplification
}

func openGoleveldb(dir string, s settings) (kvbench.Store, error) {
	o := &lopt.Options{
		WriteBuffer:                   int(s.memTable),
		CompactionTableSize:           int(s.tableSize),
		CompactionL0Trigger:           s.l0Trigger,
		WriteL0SlowdownTrigger:        s.l0Slowdown,
		WriteL0PauseTrigger:           s.l0Stop,
		CompactionTotalSize:           int(s.lbase),
		CompactionTotalSizeMultiplier: 10,
		BlockSize:                     s.blockSize,
		Filter:                        lfilter.NewBloomFilter(s.bloomBits),
		BlockCacheCapacity:            int(s.cacheSize),
		OpenFilesCacheCapacity:        1000,
	}
	if s.compression == "none" {
		o.Compression = lopt.NoCompression
	} else {
		o.Compression = lopt.SnappyCompression
	}
	db, err := leveldb.OpenFile(dir, o)
	if err != nil {
		return nil, err
	}
	return &levelStore{db: db, wo: &lopt.WriteOptions{Sync: s.sync}}, nil
}

func (l *levelStore) Name() string { return "goleveldb" }
func (l *levelStore) Set(k, v []byte) error {
	l.written.Add(int64(len(k) + len(v)))
	return l.db.Put(k, v, l.wo)
}
func (l *levelStore) Delete(k []byte) error {
	l.written.Add(int64(len(k)))
	return l.db.Delete(k, l.wo)
}
func (l *levelStore) Get(k []byte) (int, bool, error) {
	v, err := l.db.Get(k, nil)
	if errors.Is(err, lerrors.ErrNotFound) {
		return 0, false, nil
	}
	return len(v), err == nil, err
}
func (l *levelStore) Scan(start []byte, n int) (int, int64, error) {
	it := l.db.NewIterator(&lutil.Range{Start: start}, nil)
	c := 0
	var b int64
	for ok := it.First(); ok && (n < 0 || c < n); ok = it.Next() {
		b += int64(len(it.Key()) + len(it.Value()))
		c++
	}
	it.Release()
	return c, b, it.Error()
}
func (l *levelStore) Settle() error {
	var prev uint64
	stable := 0
	waitUntil(func() bool {
		var st leveldb.DBStats
		if err := l.db.Stats(&st); err != nil {
			return true
		}
		w := uint64(st.LevelWrite.Sum())
		if w == prev && (len(st.LevelTablesCounts) == 0 || st.LevelTablesCounts[0] < 4) {
			stable++
		} else {
			stable = 0
		}
		prev = w
		return stable >= 10
	})
	return nil
}
func (l *levelStore) Stats() kvbench.StoreStats {
	var st leveldb.DBStats
	if err := l.db.Stats(&st); err != nil {
		return kvbench.StoreStats{}
	}
	var dur float64
	for _, d := range st.LevelDurations {
		dur += d.Seconds()
	}
	out := kvbench.StoreStats{
		CompactionBytes: st.LevelRead.Sum() + st.LevelWrite.Sum(),
		Stalls:          int64(st.WriteDelayCount),
	}
	if w := l.written.Load(); w > 0 {
		out.WriteAmp = float64(st.IOWrite) / float64(w) // journal and tables
	}
	if dur > 0 {
		out.CompactionBandwidth = float64(out.CompactionBytes) / dur
	}
	return out
}
func (l *levelStore) Close() error { return l.db.Close() }

// badgerStore adapts Badger.
type badgerStore struct{ db *badger.DB }

func openBadger(dir string, s settings) (kvbench.Store, error) {
	o := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithSyncWrites(s.sync).
		WithMemTableSize(s.memTable).
		WithBaseTableSize(s.tableSize).
		WithBaseLevelSize(s.lbase).
		WithLevelSizeMultiplier(10).
		WithNumLevelZeroTables(s.l0Trigger).
		WithNumLevelZeroTablesStall(s.l0Stop).
		WithBlockSize(s.blockSize).
		WithBloomFalsePositive(0.01).
		WithBlockCacheSize(s.cacheSize).
		WithNumCompactors(2).
		WithDetectConflicts(false).
		WithValueThreshold(64 << 10) // keep values in the LSM tree, as the others do
	if s.compression == "none" {
		o = o.WithCompression(boptions.None)
	} else {
		o = o.WithCompression(boptions.Snappy)
	}
	db, err := badger.Open(o)
	if err != nil {
		return nil, err
	}
	return &badgerStore{db: db}, nil
}

func (b *badgerStore) Name() string { return "badger" }
func (b *badgerStore) Set(k, v []byte) error {
	return b.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
}
func (b *badgerStore) Delete(k []byte) error {
	return b.db.Update(func(txn *badger.Txn) error { return txn.Delete(k) })
}
func (b *badgerStore) Get(k []byte) (int, bool, error) {
	found, n := false, 0
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(func(v []byte) error { n = len(v); return nil })
	})
	return n, found, err
}
func (b *badgerStore) Scan(start []byte, n int) (int, int64, error) {
	c := 0
	var nb int64
	err := b.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.PrefetchValues = false
		it := txn.NewIterator(o)
		defer it.Close()
		if start == nil {
			it.Rewind()
		} else {
			it.Seek(start)
		}
		for ; it.Valid() && (n < 0 || c < n); it.Next() {
			item := it.Item()
			if err := item.Value(func(v []byte) error { nb += int64(len(item.Key()) + len(v)); return nil }); err != nil {
				return err
			}
			c++
		}
		return nil
	})
	return c, nb, err
}
func (b *badgerStore) Settle() error { return nil }
func (b *badgerStore) Stats() kvbench.StoreStats {
	return kvbench.StoreStats{}
}
func (b *badgerStore) Close() error { return b.db.Close() }
