package kv

import (
	"math"

	"github.com/warpkit/warpkit/kv/manifest"
)

// levelTargets says, for one version, which level L0 compacts into (the
// base level) and every level's target size.
//
// By default the targets follow the data (RocksDB's dynamic level bytes,
// Pebble's only rule): the deepest level's target is its size, each level
// above it holds LevelMultiplier times less, and the base level is the
// deepest level above which a level would hold less than LBaseMaxBytes. A
// small store therefore has one or two levels below L0 rather than L1, L2,
// L3 of a fixed geometry, and every byte it writes is rewritten fewer times.
// The levels between L0 and the base level are empty and never compacted.
//
// With Options.StaticLevelSizes, L0 compacts into L1, whose target is
// LBaseMaxBytes, and each deeper level's target is LevelMultiplier times the
// one above (LevelDB's rule).
type levelTargets struct {
	base     int
	maxBytes [manifest.NumLevels]float64 // +Inf above the base level; L0 unused
}

// levelTargetsLocked computes the targets of v.
func (d *DB) levelTargetsLocked(v *manifest.Version) levelTargets {
	return computeLevelTargets(v, d.opts)
}

func computeLevelTargets(v *manifest.Version, o *Options) levelTargets {
	var t levelTargets
	for l := range t.maxBytes {
		t.maxBytes[l] = math.Inf(1)
	}
	mult := float64(o.LevelMultiplier)
	lbase := float64(o.LBaseMaxBytes)
	if o.StaticLevelSizes {
		t.base = 1
		b := lbase
		for l := 1; l < manifest.NumLevels; l++ {
			t.maxBytes[l] = b
			b *= mult
		}
		return t
	}
	const last = manifest.NumLevels - 1
	first := -1
	var bottom float64
	for l := 1; l < manifest.NumLevels; l++ {
		if s := float64(sumSize(v.Levels[l])); s > 0 {
			if first < 0 {
				first = l
			}
			bottom = s
		}
	}
	if first < 0 {
		// Nothing below L0 yet: L0 compacts straight into the last level.
		t.base = last
		t.maxBytes[last] = lbase
		return t
	}
	// The size the first non-empty level would have, were every level
	// from it down LevelMultiplier times the one above.
	cur := bottom
	for l := last - 1; l >= first; l-- {
		cur /= mult
	}
	t.base = first
	if cur > lbase/mult {
		// While the base level would hold more than LBaseMaxBytes, move it
		// up a level (which holds LevelMultiplier times less). (At or below
		// lbase/mult the first non-empty level stays the base: it is all
		// there is, and small.)
		for t.base > 1 && cur > lbase {
			t.base--
			cur /= mult
		}
	}
	// Targets from LBaseMaxBytes at the base level to the bottom level's
	// size, with one ratio between neighbours.
	ratio := 1.0
	if t.base < last {
		ratio = math.Pow(bottom/lbase, 1/float64(last-t.base))
	}
	size := lbase
	for l := t.base; l < manifest.NumLevels; l++ {
		if l > t.base {
			size *= ratio
		}
		t.maxBytes[l] = size
	}
	return t
}

// outputLevel is the level a compaction out of level writes to.
func (t *levelTargets) outputLevel(level int) int {
	if level == 0 {
		return t.base
	}
	return level + 1
}
