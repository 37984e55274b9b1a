package kv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/vfs"
)

// scanAll returns every key-value pair of a DB.
func scanAll(t *testing.T, db *DB) map[string]string {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range it.All() {
		out[string(k)] = string(v)
	}
	if err := it.Error(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// oracleMapAt is the oracle's whole state at a sequence number.
func (o *oracle) mapAt(at uint64) map[string]string {
	out := map[string]string{}
	for k := range o.hist {
		if v, ok := o.get(k, at); ok {
			out[k] = string(v)
		}
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// truncate drops every version after seq.
func (o *oracle) truncate(seq uint64) {
	for k, h := range o.hist {
		i := len(h)
		for i > 0 && h[i-1].seq > seq {
			i--
		}
		o.hist[k] = h[:i]
	}
	o.seq = seq
	var b []uint64
	for _, x := range o.batches {
		if x <= seq {
			b = append(b, x)
		}
	}
	o.batches = b
}

// TestCrashRecovery crashes the store at random instants (a writer and the
// background flushes and compactions running) with a file system that keeps
// only synced data (plus a random, possibly zeroed, part of the rest). After
// reopening, the store must hold exactly the state after some prefix of the
// committed batches that includes every acknowledged synced write, must not
// report corruption, and must keep working.
func TestCrashRecovery(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 6
	}
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) { crashRound(t, uint64(round), nil) })
	}
}

// crashRound is one round of TestCrashRecovery; with compactor set, every
// compaction runs on it.
func crashRound(t *testing.T, seed uint64, compactor compaction.Compactor) {
	rng := rand.New(rand.NewPCG(seed, 99))
	fs := vfs.NewMem()
	opts := smallOptions()
	opts.FS = fs
	if seed%3 == 2 {
		opts.MaxConcurrentCompactions = 2
		opts.Compactor = compaction.CPU{Parts: 3, MinPartBytes: 1} // a crash may fall between parts
	}
	if compactor != nil {
		opts.Compactor = compactor
	}
	db, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	m := &modelRun{t: t, rng: rand.New(rand.NewPCG(seed, 7)), o: newOracle(), keys: 400, db: db}

	var (
		mu        sync.Mutex // guards the oracle while the writer runs
		syncedSeq atomic.Uint64
		stop      atomic.Bool
		wg        sync.WaitGroup
		werr      error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			ops := m.randomOps(1 + m.rng.IntN(4))
			sync := m.rng.IntN(8) == 0
			b := opsBatch(db, ops)
			var wo *WriteOptions
			if sync {
				wo = Sync
			}
			if err := b.Commit(wo); err != nil {
				werr = err
				return
			}
			mu.Lock()
			m.o.apply(ops)
			seq := m.o.seq
			mu.Unlock()
			if sync {
				syncedSeq.Store(seq)
			}
			if m.rng.IntN(200) == 0 {
				if err := db.Flush(); err != nil {
					werr = err
					return
				}
			}
		}
	}()
	time.Sleep(time.Duration(5+rng.IntN(60)) * time.Millisecond)
	mustHave := syncedSeq.Load()
	crashed := fs.CrashClone(vfs.CrashOptions{Rand: rng, ZeroTail: rng.IntN(2) == 0})
	stop.Store(true)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	db.Close()

	opts.FS = crashed
	db2, err := Open("/db", &opts)
	if err != nil {
		t.Fatalf("reopen after crash (synced through %d of %d): %v\n%s", mustHave, m.o.seq, err, crashed)
	}
	got := scanAll(t, db2)
	// Find the prefix of batches the store kept.
	found := uint64(0)
	ok := false
	cands := append([]uint64{0}, m.o.batches...)
	for i := len(cands) - 1; i >= 0; i-- {
		s := cands[i]
		if s < mustHave {
			break
		}
		if mapsEqual(got, m.o.mapAt(s)) {
			found, ok = s, true
			break
		}
	}
	if !ok {
		t.Fatalf("recovered state (%d keys) matches no batch boundary at or after the last synced write %d (wrote %d)", len(got), mustHave, m.o.seq)
	}
	t.Logf("wrote %d operations, %d synced, recovered %d", m.o.seq, mustHave, found)

	// The store keeps working: more writes, a flush, a reopen.
	m.o.truncate(found)
	m.db = db2
	m.opts = &opts
	for range 300 {
		m.write(m.randomOps(1 + m.rng.IntN(3)))
	}
	if err := db2.Flush(); err != nil {
		t.Fatal(err)
	}
	if !mapsEqual(scanAll(t, db2), m.o.mapAt(m.o.seq)) {
		t.Fatal("state diverged after recovery")
	}
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}
	db3, err := Open("/db", &opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if !mapsEqual(scanAll(t, db3), m.o.mapAt(m.o.seq)) {
		t.Fatal("state diverged after the second reopen")
	}
	for k := range m.keys {
		key := []byte(fmt.Sprintf("key%05d", k))
		v, err := db3.Get(key)
		want, wok := m.o.get(string(key), m.o.seq)
		if wok != (err == nil) || (wok && !bytes.Equal(v, want)) {
			t.Fatalf("Get(%s) after recovery: %q %v, want %q", key, trunc(v), err, trunc(want))
		}
	}
}
