package kvbench

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
	"github.com/warpkit/warpkit/kv/sstable"
	"github.com/warpkit/warpkit/kv/vfs"
)

// CompactEnv holds one compaction job for benchmarks of compactors (warp
// bench kvcompact): a compaction.DirEnv over a directory of a file system
// holding the job's input tables, and the outputs of each run until Drop
// removes them.
type CompactEnv struct {
	*compaction.DirEnv
}

// NewCompactEnv returns an empty CompactEnv over dir of fs (it must exist).
func NewCompactEnv(fs vfs.FS, dir string) *CompactEnv {
	return &CompactEnv{compaction.NewDirEnv(fs, dir)}
}

// Drop removes the tables created since the job was built or the last Drop
// (a run's outputs).
func (e *CompactEnv) Drop() error {
	var errs []error
	for _, n := range e.TakeCreated() {
		errs = append(errs, e.FS().Remove(e.Path(n)))
	}
	return errors.Join(errs...)
}

// Fingerprint is what two runs of one job must agree on: each output's
// bytes (their SHA-256) and metadata, and the Result's Stats but Duration
// and Engine.
func (e *CompactEnv) Fingerprint(res *compaction.Result) (string, error) {
	h := sha256.New()
	for _, m := range res.Outputs {
		f, err := e.FS().Open(e.Path(m.FileNum))
		if err != nil {
			return "", err
		}
		size, err := f.Size()
		if err == nil {
			buf := make([]byte, size)
			if _, err = f.ReadAt(buf, 0); err == nil {
				h.Write(buf)
			}
		}
		f.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "|%d %v %v %d %d %v|", m.Size, m.Smallest, m.Largest, m.SmallestSeq, m.LargestSeq, m.HasRangeDels)
	}
	st := res.Stats
	fmt.Fprintf(h, "%d %d %d %d %d %d", st.BytesRead, st.BytesWritten, st.EntriesIn, st.EntriesOut, st.TombstonesElided, st.RangeDelsDropped)
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// CompactJob is the shape of a benchmark's L0→L1 job: L0Tables
// overlapping L0 tables of L0Bytes of entries each over an L1 run of
// L1Bytes in tables of TableSize (also the job's target output size),
// KeyLen-byte keys (zero-padded decimal numbers, as db_bench's), ValueLen-byte
// values (half random, half repeated: Snappy halves them, as db_bench's),
// no snapshots; every L1 key is a multiple of 4, L0 keys fall anywhere in
// four times L1's range.
//
// KeyLenMax above KeyLen makes the keys' lengths vary, as the gLSM paper's
// (6..64 bytes): each key is then KeyLen to KeyLenMax bytes long (uniformly,
// the mean sizing the tables), its number zero-padded to KeyLen digits and
// followed by filler letters ('a'..'z'); the length and the filler are a
// hash of the number and Seed, so a key has the same bytes in every table
// (an L0 key equal to an L1 key overwrites it) and the keys still sort as
// their numbers. KeyLenMax 0 or KeyLen is the fixed length, whose keys and
// values are those of a job without the field. Build fails rather than
// number the job's keys with more digits than KeyLen.
type CompactJob struct {
	L0Tables                    int
	L0Bytes, L1Bytes, TableSize int
	KeyLen, ValueLen            int
	KeyLenMax                   int
	Compression                 sstable.Compression
	Seed                        uint64
}

// keyLens returns the job's shortest and longest key lengths.
func (sh CompactJob) keyLens() (lo, hi int) {
	if sh.KeyLenMax == 0 {
		return sh.KeyLen, sh.KeyLen
	}
	return sh.KeyLen, sh.KeyLenMax
}

// keyFunc returns the job's key of each number in [0, keySpace), or an error
// if KeyLen digits cannot number them all (longer numbers would sort out of
// order) or the lengths are wrong.
func (sh CompactJob) keyFunc(keySpace int) (func(k int) []byte, error) {
	lo, hi := sh.keyLens()
	switch {
	case lo < 1:
		return nil, fmt.Errorf("kvbench: key length %d, want at least 1", lo)
	case hi < lo:
		return nil, fmt.Errorf("kvbench: KeyLenMax %d below KeyLen %d", hi, lo)
	}
	if digits := len(strconv.Itoa(max(0, keySpace-1))); digits > lo {
		return nil, fmt.Errorf("kvbench: the job numbers %d keys, %d digits, more than its %d-byte (shortest) keys hold: raise KeyLen or shrink L1Bytes", keySpace, digits, lo)
	}
	if lo == hi {
		return func(k int) []byte { return fmt.Appendf(nil, "%0*d", lo, k) }, nil
	}
	span := uint64(hi - lo + 1)
	return func(k int) []byte {
		x := splitmix64(sh.Seed ^ splitmix64(uint64(k)))
		n := lo + int(x%span)
		b := fmt.Appendf(make([]byte, 0, n), "%0*d", lo, k)
		for len(b) < n {
			x = splitmix64(x)
			b = append(b, 'a'+byte(x%26))
		}
		return b
	}, nil
}

// splitmix64 is SplitMix64's finalizer of x plus its increment: a
// bijective mix of 64 bits.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Build writes the job's input tables into e and returns the job, whose
// outputs go to e too.
func (e *CompactEnv) Build(sh CompactJob) (*compaction.Job, error) {
	opts := sstable.WriterOptions{BlockSize: 4096, BloomBitsPerKey: 10, Compression: sh.Compression}
	env := e.DirEnv.Env(opts)
	rng := rand.New(rand.NewPCG(sh.Seed, uint64(sh.ValueLen)))
	lo, hi := sh.keyLens()
	perEntry := max(1, (lo+hi)/2+8+sh.ValueLen) // the mean key length
	n1 := max(1, sh.L1Bytes/perEntry)
	n0 := max(1, sh.L0Bytes/perEntry)
	keySpace := 4 * n1 // L1 holds every fourth key; L0 keys fall anywhere
	key, err := sh.keyFunc(keySpace)
	if err != nil {
		return nil, err
	}
	value := make([]byte, sh.ValueLen)
	fill := func() []byte {
		for i := range value[:sh.ValueLen/2] {
			value[i] = byte(rng.Uint32())
		}
		return value
	}
	write := func(keys []int, seq func(i int) base.SeqNum) (*manifest.FileMetadata, error) {
		num, f, err := env.CreateTable()
		if err != nil {
			return nil, err
		}
		w := sstable.NewWriter(f, opts)
		for i, k := range keys {
			if err := w.Add(base.MakeInternalKey(key(k), seq(i), base.KindSet), fill()); err != nil {
				f.Close()
				return nil, err
			}
		}
		m, err := w.Finish()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		return &manifest.FileMetadata{FileNum: num, Size: m.Size, Smallest: m.Smallest, Largest: m.Largest,
			SmallestSeq: m.SmallestSeq, LargestSeq: m.LargestSeq}, nil
	}
	job := &compaction.Job{OutputLevel: 1, TargetFileSize: uint64(sh.TableSize), Env: env}
	// L1: sorted, disjoint tables of about tableSize bytes of entries.
	var l1 []*manifest.FileMetadata
	per := max(1, sh.TableSize/perEntry)
	for start := 0; start < n1; start += per {
		var keys []int
		for i := start; i < min(n1, start+per); i++ {
			keys = append(keys, 4*i)
		}
		m, err := write(keys, func(int) base.SeqNum { return 1 })
		if err != nil {
			return nil, err
		}
		l1 = append(l1, m)
	}
	// L0: each table's keys random and distinct, newer tables first.
	var l0 []*manifest.FileMetadata
	seq := base.SeqNum(2)
	for range sh.L0Tables {
		seen := make(map[int]bool, n0)
		keys := make([]int, 0, n0)
		for len(keys) < n0 && len(keys) < keySpace {
			if k := rng.IntN(keySpace); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		slices.Sort(keys) // zero-padded to a fixed width: the keys sort as their numbers
		first := seq
		m, err := write(keys, func(i int) base.SeqNum { return first + base.SeqNum(i) })
		if err != nil {
			return nil, err
		}
		seq += base.SeqNum(len(keys))
		l0 = append([]*manifest.FileMetadata{m}, l0...)
	}
	e.TakeCreated() // the inputs stay
	job.Inputs = []compaction.Input{{Level: 0, Files: l0}, {Level: 1, Files: l1}}
	return job, nil
}
