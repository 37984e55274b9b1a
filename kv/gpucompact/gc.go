package gpucompact

import (
	"bytes"
	"context"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/warpkit/warpkit/internal/hostpar"
	"github.com/warpkit/warpkit/kv/compaction"
	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/internal/rangedel"
	"github.com/warpkit/warpkit/kv/manifest"
)

// loadJob reads every input table of job into one inputSet: each L0 table
// a run of its own, each deeper level's tables (sorted, disjoint) one run.
// Tables are read and decoded on up to GOMAXPROCS goroutines, each into an
// inputSet of its own, then appended in job order. Tables are read through
// job.Env (OpenTable for the index, OpenTableFile for one read of the data
// region).
func loadJob(ctx context.Context, job *compaction.Job) (*inputSet, error) {
	type table struct {
		f     *manifest.FileMetadata
		level int
		s     inputSet
		err   error
	}
	var tables []*table
	for _, in := range job.Inputs {
		for _, f := range in.Files {
			tables = append(tables, &table{f: f, level: in.Level})
		}
	}
	load := func(t *table) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, release, err := job.Env.OpenTable(t.f)
		if err != nil {
			return err
		}
		defer release()
		file, err := job.Env.OpenTableFile(t.f)
		if err != nil {
			return err
		}
		err = t.s.addTable(r, file, t.f.FileNum.String())
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		return err
	}
	next := make(chan *table)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(tables)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				t.err = load(t)
			}
		}()
	}
	for _, t := range tables {
		next <- t
	}
	close(next)
	wg.Wait()
	// One allocation per array, each table copied into its place on a
	// goroutine of its own.
	var arena, keys, ents uint64
	for _, t := range tables {
		if t.err != nil {
			return nil, t.err
		}
		arena += uint64(len(t.s.arena))
		keys += uint64(len(t.s.keys))
		ents += uint64(len(t.s.ents))
	}
	if arena > math.MaxUint32 || keys > math.MaxUint32 {
		return nil, errTooLarge
	}
	s := &inputSet{arena: make([]byte, arena), keys: make([]byte, keys), ents: make([]entry, ents)}
	var a, k, n int
	for i, t := range tables {
		wg.Add(1)
		go func(a, k, n int) {
			defer wg.Done()
			copy(s.arena[a:], t.s.arena)
			copy(s.keys[k:], t.s.keys)
			for j, e := range t.s.ents {
				e.valOff += uint32(a)
				e.keyOff += uint32(k)
				s.ents[n+j] = e
			}
		}(a, k, n)
		a, k, n = a+len(t.s.arena), k+len(t.s.keys), n+len(t.s.ents)
		if t.level == 0 || i == len(tables)-1 || tables[i+1].level != t.level {
			s.runs = append(s.runs, run{start: s.runEnd(), end: n})
		}
	}
	wg.Wait()
	for i := 0; i < len(s.runs); i++ { // a table of range tombstones only makes an empty run
		if s.runs[i].start == s.runs[i].end {
			s.runs = append(s.runs[:i], s.runs[i+1:]...)
			i--
		}
	}
	return s, nil
}

// gcStats count what the garbage-collection stage saw and dropped.
type gcStats struct {
	entriesIn, entriesOut, tombstonesElided uint64
}

// gc returns the entries of the merged order that survive the compaction,
// in order: it decides every position independently — as a GPU thread per
// entry would — by compaction.CPU's rules, with the same helpers:
//
//   - shadowed: the previous entry has the same user key and its snapshot
//     stripe (compaction.StripeOf) is the same, so no snapshot can tell the
//     two apart and the older one goes;
//   - covered: a range tombstone of the job's fragmented spans
//     (compaction.CollectSpans) over the key is newer than the entry and in
//     its stripe (compaction.CoveredInStripe);
//   - elided: a point tombstone in stripe 0 where no level below the output
//     can hold the key (Job.ElideTombstone).
//
// The positions are split among goroutines; each decision needs only the
// entry and its predecessor.
//
// Besides the kept ids it returns, for each, whether its user key differs
// from the previous entry's in the merged order (kept or not): outputs are
// cut only there, as compaction.CPU cuts.
func (s *inputSet) gc(order []uint32, job *compaction.Job, spans []rangedel.Span) ([]uint32, []bool, gcStats) {
	n := len(order)
	keep := make([]bool, n)
	newKey := make([]bool, n)
	elided := make([]bool, n)
	snaps := job.Snapshots
	hostpar.ForCores(n, 4096, func(_, lo, hi int) {
		// The predecessor's stripe: computed for the part's first entry,
		// carried along after.
		prevStripe := -1
		if lo > 0 {
			prevStripe = compaction.StripeOf(snaps, s.ents[order[lo-1]].trailer.SeqNum())
		}
		for i := lo; i < hi; i++ {
			id := order[i]
			k := s.internalKey(id)
			q := k.SeqNum()
			stripe := compaction.StripeOf(snaps, q)
			samePrev := prevStripe == stripe
			prevStripe = stripe
			newKey[i] = true
			if i > 0 && bytes.Equal(s.key(order[i-1]), k.UserKey) {
				newKey[i] = false
				if samePrev {
					continue // shadowed
				}
			}
			if sp := spanAt(spans, k.UserKey); sp != nil && compaction.CoveredInStripe(sp, q, stripe, snaps) {
				continue
			}
			if k.Kind() == base.KindDelete && stripe == 0 && job.ElideTombstone(k.UserKey) {
				elided[i] = true
				continue
			}
			keep[i] = true
		}
	})
	// Select the kept ids (a GPU does this with a flagged select).
	st := gcStats{entriesIn: uint64(n)}
	kept := make([]uint32, 0, n)
	keptNew := make([]bool, 0, n)
	for i, k := range keep {
		if k {
			kept = append(kept, order[i])
			keptNew = append(keptNew, newKey[i])
		} else if elided[i] {
			st.tombstonesElided++
		}
	}
	st.entriesOut = uint64(len(kept))
	return kept, keptNew, st
}

// spanAt returns the fragment of spans (sorted, disjoint) holding key, or
// nil.
func spanAt(spans []rangedel.Span, key []byte) *rangedel.Span {
	i := sort.Search(len(spans), func(i int) bool { return bytes.Compare(spans[i].End, key) > 0 })
	if i < len(spans) && bytes.Compare(spans[i].Start, key) <= 0 {
		return &spans[i]
	}
	return nil
}
