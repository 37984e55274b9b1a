// Package record reads and writes the record log used for the kv store's
// write-ahead logs and manifests. The format is LevelDB's log format.
//
// # Format
//
// A log file is a sequence of 32 KiB blocks; only the last block may be
// shorter. A block holds chunks, each a 7-byte header and a payload:
//
//	+----------+--------+------+----------------+
//	| checksum | length | type | payload        |
//	| 4 bytes  | 2 bytes| 1 B  | length bytes   |
//	+----------+--------+------+----------------+
//
// checksum is the masked CRC-32C (Castagnoli) of the type byte followed by
// the payload, little-endian; length is the payload length, little-endian.
// Masking (rotate right 15 bits, add 0xa282ead8) keeps the CRC of data that
// embeds CRCs well distributed. A chunk never crosses a block boundary: when
// fewer than 7 bytes remain in a block they are zero-filled and the next
// chunk starts the next block, so every block that holds data starts with a
// chunk header.
//
// A record is one FULL chunk (type 1), or a FIRST chunk (2), any number of
// MIDDLE chunks (3) and a LAST chunk (4), in consecutive chunks. Type 0 is
// never written; it is what zero-filled (preallocated or torn) space reads as.
//
// # Reading damaged logs
//
// Reader.Next reports every malformed chunk (bad checksum, bad type, a length
// that overruns its block, a record cut short by the end of the file) as a
// *base.CorruptionError naming the file and the chunk's offset. The caller
// then decides with Reader.SkipCorruption, which looks for any valid chunk
// after the damage: if there is none, the damage is a torn tail (the end of a
// write that a crash cut short, or zeros up to the end of the file) and can
// be ignored, if no later log holds records (the kv store syncs a log whole
// before it writes to the next); if there is one, the log
// is damaged in the middle, which is an error unless the caller chose to
// salvage, in which case reading resumes at the next record.
//
// # Writing
//
// Writer is a plain buffered writer (used for manifests). LogWriter adds a
// background goroutine that hands filled bytes to the file as soon as they
// exist and serves sync requests, so that concurrent commits share one fsync
// (group commit) and the committing goroutine never waits for a write(2).
package record

import (
	"hash/crc32"
)

const (
	// BlockSize is the size of a log block.
	BlockSize = 32 << 10
	// HeaderSize is the size of a chunk header.
	HeaderSize = 7

	chunkZero   = 0
	chunkFull   = 1
	chunkFirst  = 2
	chunkMiddle = 3
	chunkLast   = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const maskDelta = 0xa282ead8

// MaskCRC returns the masked form of a CRC-32C stored on disk.
func MaskCRC(c uint32) uint32 { return (c>>15 | c<<17) + maskDelta }

// UnmaskCRC inverts MaskCRC.
func UnmaskCRC(m uint32) uint32 {
	r := m - maskDelta
	return r>>17 | r<<15
}

// chunkCRC is the masked CRC of a chunk's type and payload.
func chunkCRC(typ byte, payload []byte) uint32 {
	c := crc32.Update(0, crcTable, []byte{typ})
	return MaskCRC(crc32.Update(c, crcTable, payload))
}

// chunkType is the type of a record's chunk: FULL, or FIRST, MIDDLE, LAST.
func chunkType(first, last bool) byte {
	switch {
	case first && last:
		return chunkFull
	case first:
		return chunkFirst
	case last:
		return chunkLast
	}
	return chunkMiddle
}

// CRC returns the CRC-32C of p (unmasked); other packages use it for block
// checksums so that every layer uses the same polynomial.
func CRC(p []byte) uint32 { return crc32.Checksum(p, crcTable) }

// CRCTable returns the table CRC computes with (CRC-32C, reflected), for
// checksums computed elsewhere: kv/gpucompact's kernels derive theirs from
// it.
func CRCTable() [256]uint32 { return *crcTable }

// ExtendCRC continues a CRC-32C over more data.
func ExtendCRC(c uint32, p []byte) uint32 { return crc32.Update(c, crcTable, p) }
