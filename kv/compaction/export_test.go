package compaction

// Hooks for this package's external tests (package compaction_test, which
// shares its jobs with other compactors' tests through compactiontest).

// SplitPoints returns the user keys that cut job into parts.
func (c CPU) SplitPoints(job *Job) [][]byte { return c.splitPoints(job) }

// WithStoredSizeCut returns c cutting outputs on their stored size, the rule
// before the cut on uncompressed size.
func (c CPU) WithStoredSizeCut() CPU {
	c.storedSizeCut = true
	return c
}
