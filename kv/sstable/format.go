package sstable

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
)

const (
	blockTrailerLen = 5
	footerLen       = 56
	handlesLen      = 40
	formatVersion   = 1
	tableMagic      = uint64(0x7762747673776b77)

	metaFilter     = "warpkit.bloom"
	metaRangeDel   = "warpkit.rangedel"
	metaProperties = "warpkit.properties"
)

// Compression selects how data blocks are compressed.
type Compression uint8

// Compression algorithms. A block is stored uncompressed when compression
// saves less than 1/8 of its size.
const (
	NoCompression     Compression = 0
	SnappyCompression Compression = 1
	S2Compression     Compression = 2
)

// String names the algorithm.
func (c Compression) String() string {
	switch c {
	case NoCompression:
		return "none"
	case SnappyCompression:
		return "snappy"
	case S2Compression:
		return "s2"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// ParseCompression parses String's output.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "none", "":
		return NoCompression, nil
	case "snappy":
		return SnappyCompression, nil
	case "s2":
		return S2Compression, nil
	}
	return 0, fmt.Errorf("sstable: unknown compression %q (none, snappy, s2)", s)
}

// compress returns the stored form of a block and its type byte. Blocks
// larger than maxCompressedBlockSize are stored uncompressed.
func compress(c Compression, dst, block []byte) ([]byte, Compression) {
	if len(block) > maxCompressedBlockSize {
		return block, NoCompression
	}
	var out []byte
	switch c {
	case SnappyCompression:
		// S2's Snappy-compatible fast encoder: the same format as
		// github.com/golang/snappy, several times faster than
		// klauspost/compress/snappy's default (which uses the "better" mode).
		out = s2.EncodeSnappy(dst[:cap(dst)], block)
	case S2Compression:
		out = s2.Encode(dst[:cap(dst)], block)
	default:
		return block, NoCompression
	}
	if len(out) >= len(block)-len(block)/8 {
		return block, NoCompression
	}
	return out, c
}

// decompress returns a block's contents from its stored form, decoding into
// dst when it is large enough (else into new memory). An uncompressed block
// is returned as is.
func decompress(c Compression, stored, dst []byte) ([]byte, error) {
	n, err := decodedLen(c, stored)
	if err != nil {
		return nil, err
	}
	if c == NoCompression {
		return stored, nil
	}
	return s2.Decode(sized(dst, n), stored) // S2's decoder reads Snappy
}

// decodedLen is the length a stored block of compression c decompresses
// to, from its header.
func decodedLen(c Compression, stored []byte) (int, error) {
	var n int
	var err error
	switch c {
	case NoCompression:
		return len(stored), nil
	case SnappyCompression:
		n, err = snappy.DecodedLen(stored)
	case S2Compression:
		n, err = s2.DecodedLen(stored)
	default:
		return 0, fmt.Errorf("unknown compression type %d", c)
	}
	if err != nil {
		return 0, err
	}
	if n > maxCompressedBlockSize {
		return 0, fmt.Errorf("decoded length %d too large", n)
	}
	return n, nil
}

func sized(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:n]
	}
	return make([]byte, n)
}

// maxCompressedBlockSize bounds the decoded size of a compressed block, so
// that a decoded length in a damaged (or crafted) block cannot make the
// reader allocate without limit. The writer stores larger blocks (a data
// block holding a value of more than 64 MiB) uncompressed; an uncompressed
// block is bounded by the file it is in. A variable so that tests can lower
// it.
var maxCompressedBlockSize = 64 << 20

// handle locates a block.
type handle struct {
	offset, length uint64
}

func (h handle) append(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, h.offset)
	return binary.AppendUvarint(dst, h.length)
}

func decodeHandle(b []byte) (handle, int, bool) {
	off, n := binary.Uvarint(b)
	if n <= 0 {
		return handle{}, 0, false
	}
	length, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return handle{}, 0, false
	}
	return handle{off, length}, n + m, true
}
