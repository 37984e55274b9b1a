package manifest

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// FileMetadata describes a table. The persisted fields never change after the
// table is added; Compacting is guarded by the store's mutex.
type FileMetadata struct {
	FileNum      base.FileNum
	Size         uint64
	Smallest     base.InternalKey
	Largest      base.InternalKey // may be an exclusive sentinel
	SmallestSeq  base.SeqNum
	LargestSeq   base.SeqNum
	HasRangeDels bool

	// Compacting marks a table that is an input of a running compaction.
	Compacting bool

	refs atomic.Int32 // versions listing this table
}

// String prints "NNNNNN:[smallest-largest]".
func (f *FileMetadata) String() string {
	return fmt.Sprintf("%s:[%v-%v]", f.FileNum, f.Smallest, f.Largest)
}

// ContainsUserKey reports whether the table's bounds include user key k.
func (f *FileMetadata) ContainsUserKey(k []byte) bool {
	return bytes.Compare(k, f.Smallest.UserKey) >= 0 && !f.EndsBefore(k)
}

// EndsBefore reports whether every key the table's bounds admit sorts
// before user key k: k is past the largest user key, or equal to it when
// the bound is a range tombstone's exclusive end (the sentinel).
func (f *FileMetadata) EndsBefore(k []byte) bool {
	c := bytes.Compare(k, f.Largest.UserKey)
	return c > 0 || (c == 0 && f.Largest.IsExclusiveSentinel())
}

// Overlaps reports whether the table's bounds meet the user-key range
// [start, end] (inclusive; nil is unbounded).
func (f *FileMetadata) Overlaps(start, end []byte) bool {
	if end != nil && bytes.Compare(end, f.Smallest.UserKey) < 0 {
		return false
	}
	return start == nil || !f.EndsBefore(start)
}

// Version is an immutable list of tables per level. Hold a reference (Ref,
// Unref) while reading through it.
type Version struct {
	Levels [NumLevels][]*FileMetadata

	refs       atomic.Int32
	vs         *VersionSet
	prev, next *Version // in vs's list of live versions
}

// Ref adds a reference.
func (v *Version) Ref() { v.refs.Add(1) }

// Unref drops a reference; the last one releases the version's tables.
func (v *Version) Unref() {
	switch n := v.refs.Add(-1); {
	case n == 0:
		v.vs.release(v)
	case n < 0:
		panic("manifest: version unreferenced too often")
	}
}

// LevelSize returns the total size of a level's tables.
func (v *Version) LevelSize(level int) uint64 {
	var n uint64
	for _, f := range v.Levels[level] {
		n += f.Size
	}
	return n
}

// String lists the levels, for diagnostics.
func (v *Version) String() string {
	var b strings.Builder
	for l, files := range v.Levels {
		if len(files) == 0 {
			continue
		}
		fmt.Fprintf(&b, "L%d:", l)
		for _, f := range files {
			fmt.Fprintf(&b, " %v", f)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Overlapping returns the tables of a level that meet the user-key range
// [start, end] (nil bounds are open). For L0 the range grows until it
// covers every table that overlaps a table in the result (L0 tables overlap
// each other, and a compaction must take all of them that meet its range).
func (v *Version) Overlapping(level int, start, end []byte) []*FileMetadata {
	files := v.Levels[level]
	if level > 0 {
		// Sorted and disjoint: binary search the first that can overlap.
		i := sort.Search(len(files), func(i int) bool { return files[i].Overlaps(start, nil) })
		var out []*FileMetadata
		for ; i < len(files) && files[i].Overlaps(start, end); i++ {
			out = append(out, files[i])
		}
		return out
	}
	for {
		var out []*FileMetadata
		grown := false
		for _, f := range files {
			if !f.Overlaps(start, end) {
				continue
			}
			out = append(out, f)
			if start != nil && bytes.Compare(f.Smallest.UserKey, start) < 0 {
				start, grown = f.Smallest.UserKey, true
			}
			if end != nil && bytes.Compare(f.Largest.UserKey, end) > 0 {
				end, grown = f.Largest.UserKey, true
			}
		}
		if !grown {
			return out
		}
	}
}

// FindFile returns, for a level >= 1, the table whose bounds include user key
// k, or nil.
func (v *Version) FindFile(level int, k []byte) *FileMetadata {
	files := v.Levels[level]
	i := sort.Search(len(files), func(i int) bool { return !files[i].EndsBefore(k) })
	if i < len(files) && files[i].ContainsUserKey(k) {
		return files[i]
	}
	return nil
}

// CheckOrdering verifies the level invariants: L0 ordered by sequence number,
// L1+ sorted and disjoint.
func (v *Version) CheckOrdering() error {
	for l, files := range v.Levels {
		for i := 1; i < len(files); i++ {
			a, b := files[i-1], files[i]
			if l == 0 {
				if a.LargestSeq > b.LargestSeq || (a.LargestSeq == b.LargestSeq && a.FileNum > b.FileNum) {
					return fmt.Errorf("manifest: L0 tables %s and %s out of sequence order", a.FileNum, b.FileNum)
				}
				continue
			}
			if base.CompareInternal(a.Largest, b.Smallest) >= 0 {
				return fmt.Errorf("manifest: L%d tables %v and %v overlap", l, a, b)
			}
			if bytes.Equal(a.Largest.UserKey, b.Smallest.UserKey) && !a.Largest.IsExclusiveSentinel() {
				return fmt.Errorf("manifest: L%d tables %v and %v share user key %q", l, a, b, b.Smallest.UserKey)
			}
		}
	}
	return nil
}

// apply returns a new version: v with the edit's deletions and additions.
func (v *Version) apply(e *VersionEdit) (*Version, error) {
	nv := &Version{}
	deleted := map[DeletedFile]bool{}
	for _, d := range e.DeletedFiles {
		deleted[d] = true
	}
	for l := range NumLevels {
		for _, f := range v.Levels[l] {
			if deleted[DeletedFile{l, f.FileNum}] {
				delete(deleted, DeletedFile{l, f.FileNum})
				continue
			}
			nv.Levels[l] = append(nv.Levels[l], f)
		}
	}
	if len(deleted) > 0 {
		for d := range deleted {
			return nil, fmt.Errorf("manifest: edit deletes table %s not in L%d", d.FileNum, d.Level)
		}
	}
	for _, n := range e.NewFiles {
		nv.Levels[n.Level] = append(nv.Levels[n.Level], n.Meta)
	}
	sort.SliceStable(nv.Levels[0], func(i, j int) bool {
		a, b := nv.Levels[0][i], nv.Levels[0][j]
		if a.LargestSeq != b.LargestSeq {
			return a.LargestSeq < b.LargestSeq
		}
		return a.FileNum < b.FileNum
	})
	for l := 1; l < NumLevels; l++ {
		sort.Slice(nv.Levels[l], func(i, j int) bool {
			return base.CompareInternal(nv.Levels[l][i].Smallest, nv.Levels[l][j].Smallest) < 0
		})
	}
	if err := nv.CheckOrdering(); err != nil {
		return nil, err
	}
	return nv, nil
}
