package sstable

import "sync/atomic"

type readerStats struct {
	blockReads          atomic.Int64
	bytesRead           atomic.Int64
	bloomNegatives      atomic.Int64
	bloomFalsePositives atomic.Int64
}

// ReaderStats count a Reader's work.
type ReaderStats struct {
	BlockReads          int64 // blocks read from the file (cache misses and metadata)
	BytesRead           int64
	BloomNegatives      int64 // Gets the filter answered without reading
	BloomFalsePositives int64 // Gets the filter let through for absent keys
}

// Stats returns the reader's counters.
func (r *Reader) Stats() ReaderStats {
	return ReaderStats{
		BlockReads:          r.stats.blockReads.Load(),
		BytesRead:           r.stats.bytesRead.Load(),
		BloomNegatives:      r.stats.bloomNegatives.Load(),
		BloomFalsePositives: r.stats.bloomFalsePositives.Load(),
	}
}
