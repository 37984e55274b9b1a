package kv

import (
	"fmt"

	"github.com/warpkit/warpkit/kv/internal/base"
	"github.com/warpkit/warpkit/kv/manifest"
)

// CheckIntegrity reads every table of the current version: it verifies every
// block's checksum, that keys are in order and inside the table's recorded
// bounds, and that the levels obey their invariants. It returns the first
// problem found (a *CorruptionError for damaged data).
func (d *DB) CheckIntegrity() error {
	rs := d.loadReadState()
	if rs == nil {
		return ErrClosed
	}
	defer rs.unref()
	v := rs.version
	if err := v.CheckOrdering(); err != nil {
		return err
	}
	for level, files := range v.Levels {
		for _, f := range files {
			if err := d.checkTable(level, f); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *DB) checkTable(level int, f *manifest.FileMetadata) error {
	r, release, err := d.tables.get(f)
	if err != nil {
		return err
	}
	defer release()
	name := base.MakeFilename(base.FileTypeTable, f.FileNum)
	if err := r.ValidateChecksums(); err != nil {
		return err
	}
	it := r.NewCompactionIter()
	defer it.Close()
	var prev base.InternalKey
	first := true
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if !first && base.CompareInternal(prev, k) >= 0 {
			return base.Corruptf(name, -1, "keys out of order: %v then %v", prev, k)
		}
		if base.CompareInternal(k, f.Smallest) < 0 || base.CompareInternal(k, f.Largest) > 0 {
			return base.Corruptf(name, -1, "key %v outside the table's bounds [%v, %v] in L%d", k, f.Smallest, f.Largest, level)
		}
		if k.SeqNum() < f.SmallestSeq || k.SeqNum() > f.LargestSeq {
			return base.Corruptf(name, -1, "key %v outside the table's sequence range [%d, %d]", k, f.SmallestSeq, f.LargestSeq)
		}
		prev = k.Clone()
		first = false
	}
	if err := it.Error(); err != nil {
		return err
	}
	if f.HasRangeDels != !r.RangeDels().Empty() {
		return fmt.Errorf("kv: table %s: manifest and table disagree about range tombstones", name)
	}
	return nil
}
