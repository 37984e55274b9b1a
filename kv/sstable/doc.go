// Package sstable reads and writes the kv store's sorted string tables:
// immutable files of internal keys in order, with their values, a bloom
// filter over the user keys, the table's range tombstones and its properties.
// The layout follows LevelDB's table format, with a full-table filter (as in
// Pebble and RocksDB) and a range-deletion block.
//
// # File layout
//
//	[data block 1] ... [data block N]
//	[filter block]       optional: bloom filter over every user key
//	[range-del block]    optional: the table's range tombstones
//	[properties block]
//	[metaindex block]    names -> handles of the three blocks above
//	[index block]        one entry per data block
//	[footer]             56 bytes
//
// Every block is followed by a 5-byte trailer: one byte naming the block's
// compression (0 none, 1 Snappy, 2 S2) and the masked CRC-32C (see package
// record) of the stored block bytes followed by that byte, little-endian. A
// block handle is the uvarint offset and uvarint length of a block, trailer
// not included.
//
// # Blocks
//
// Data, index, range-del, properties and metaindex blocks share one format:
// entries with shared-prefix key compression, then an array of restart
// points and its length:
//
//	entry:    shared uvarint | unshared uvarint | value_len uvarint |
//	          key[shared:] (unshared bytes) | value (value_len bytes)
//	trailer:  restart offsets uint32 LE x num_restarts | num_restarts uint32 LE
//
// shared is the length of the prefix the key has in common with the previous
// entry's key; at a restart point shared is 0, so a reader can binary-search
// the restart points and then scan at most restart-interval entries (16 in
// data blocks, 1 in index blocks). Keys are encoded internal keys (user key +
// 8-byte trailer, see kv/internal/base) in data, index and range-del blocks,
// and plain names in properties and metaindex blocks.
//
// A data block ends when it reaches the block size (4 KiB by default), so a
// block may exceed it by one entry: a value of any size is one entry. A data
// block's index entry's key is an internal key >= every key in the block and
// < every key in the next block (shortened where possible); its value is the
// block's handle. A range-del block holds one entry per fragment and sequence
// number: key (start, seq, RANGEDEL), value = exclusive end key; fragments do
// not overlap (kv/internal/rangedel).
//
// Only data blocks are compressed, and only those of at most 64 MiB: larger
// ones (holding a larger value) are stored uncompressed, so that a reader
// never decodes a compressed block to more than 64 MiB, whatever length a
// damaged block claims. Any block, compressed or not, must lie within its
// file.
//
// # Properties
//
// The properties block maps names to values: numbers as uvarints, strings
// as their bytes (see Properties for the full list). Among them, data.size
// is the stored size of the data blocks, trailers included, and
// data.raw-size their size before compression: the sum over data blocks of
// the block's uncompressed length (entries and restart array, what a reader
// decodes) plus its 5-byte trailer. The two are equal when no data block is
// compressed; data.raw-size / data.size is the table's compression ratio.
// Tables written before data.raw-size existed lack it and read with
// RawDataSize = DataSize (ratio 1). A reader ignores names it does not know.
//
// # Filter
//
// The filter block is a bloom filter over the table's distinct user keys:
// bit array, then one byte k (number of probes). Probes use LevelDB's 32-bit
// hash with double hashing (delta = h>>17 | h<<15). With the default 10 bits
// per key, k = 6 and the false-positive rate is about 0.8%.
//
// # Footer
//
//	metaindex handle | index handle   (uvarints, zero-padded to 40 bytes)
//	format version   uint32 LE        (1)
//	footer checksum  uint32 LE        (masked CRC-32C of the previous 44 bytes)
//	magic            uint64 LE        0x7762747673776b77 ("wkwsvtbw")
//
// # Contracts
//
// A Writer is used by one goroutine. A Reader is safe for concurrent use;
// its iterators are not. Keys and values returned by an iterator stay valid
// until the iterator moves or closes. Every read is bounds-checked and every
// block checksummed: damaged input gives a *base.CorruptionError naming the
// file and the block's offset, never a panic.
//
// # Blocks built in bulk
//
// A compactor that decodes, merges and encodes many entries at once (a GPU
// compactor, kv/gpucompact) hands the Writer whole data blocks with
// AddEncodedBlock, sealed in parallel with SealBlock or left for the
// Writer to compress, and may give it the bloom filter with SetFilter; the
// table is byte-identical to the one Add would write for the same entries
// as long as the blocks are cut and laid out as Add's builder does
// (encoded.go says how). AddEncodedBlocks takes a run of them: where the
// file writes vectors (vfs.VectorWriter: writev(2), MemFS) and the run
// holds 64 KiB of sealed bytes or more, those go to the file from the
// caller's memory, a run of them in one call where nothing is compressed
// between them, without the copy into the Writer's buffer.
// Reader.DataBlocks and Reader.DecodeBlock give such
// a compactor the input tables' blocks without iterating them.
package sstable
