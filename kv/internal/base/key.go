package base

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// SeqNum is a sequence number: every write gets the next one, and a read at
// sequence number s sees exactly the writes numbered <= s.
type SeqNum uint64

// SeqNumMax is larger than any sequence number a write can get. It appears
// only in seek keys and in range-tombstone end sentinels.
const SeqNumMax SeqNum = 1<<56 - 1

// Kind says what an entry is.
type Kind uint8

// Entry kinds. The numbers are part of the on-disk format (WAL batches and
// SSTable trailers); never renumber them.
const (
	KindDelete      Kind = 0 // point tombstone: the user key is deleted
	KindSet         Kind = 1 // the user key has a value
	KindRangeDelete Kind = 2 // range tombstone: [user key, value) is deleted
	// KindMax is the largest kind; a seek key uses it so that it sorts before
	// every entry of its user key at the same sequence number.
	KindMax Kind = 2
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindDelete:
		return "DEL"
	case KindSet:
		return "SET"
	case KindRangeDelete:
		return "RANGEDEL"
	}
	return fmt.Sprintf("KIND(%d)", uint8(k))
}

// Trailer packs a sequence number and a kind: seq<<8 | kind.
type Trailer uint64

// MakeTrailer packs seq and kind.
func MakeTrailer(seq SeqNum, kind Kind) Trailer { return Trailer(uint64(seq)<<8 | uint64(kind)) }

// SeqNum returns the trailer's sequence number.
func (t Trailer) SeqNum() SeqNum { return SeqNum(t >> 8) }

// Kind returns the trailer's kind.
func (t Trailer) Kind() Kind { return Kind(t & 0xff) }

// TrailerSeek sorts before every real entry of a user key: a SeekGE(userKey)
// positions at the first internal key >= (userKey, TrailerSeek).
const TrailerSeek = Trailer(uint64(SeqNumMax)<<8 | 0xff)

// TrailerRangeDelSentinel marks an internal key used as an exclusive upper
// bound: (k, TrailerRangeDelSentinel) sorts before every real entry of k, so a
// table whose largest key is that sentinel holds nothing at user key k.
const TrailerRangeDelSentinel = Trailer(uint64(SeqNumMax)<<8 | uint64(KindRangeDelete))

// InternalKey is a user key and its trailer.
type InternalKey struct {
	UserKey []byte
	Trailer Trailer
}

// MakeInternalKey builds an internal key.
func MakeInternalKey(userKey []byte, seq SeqNum, kind Kind) InternalKey {
	return InternalKey{UserKey: userKey, Trailer: MakeTrailer(seq, kind)}
}

// MakeSentinel returns the exclusive upper bound at userKey.
func MakeSentinel(userKey []byte) InternalKey {
	return InternalKey{UserKey: userKey, Trailer: TrailerRangeDelSentinel}
}

// SeqNum returns the key's sequence number.
func (k InternalKey) SeqNum() SeqNum { return k.Trailer.SeqNum() }

// Kind returns the key's kind.
func (k InternalKey) Kind() Kind { return k.Trailer.Kind() }

// IsExclusiveSentinel reports whether k is an exclusive upper bound (see
// TrailerRangeDelSentinel).
func (k InternalKey) IsExclusiveSentinel() bool { return k.Trailer == TrailerRangeDelSentinel }

// Size is the encoded length: len(UserKey)+8.
func (k InternalKey) Size() int { return len(k.UserKey) + 8 }

// Encode writes the key into buf, which must have room for Size bytes.
func (k InternalKey) Encode(buf []byte) {
	n := copy(buf, k.UserKey)
	binary.LittleEndian.PutUint64(buf[n:], uint64(k.Trailer))
}

// Append appends the encoded key to dst.
func (k InternalKey) Append(dst []byte) []byte {
	dst = append(dst, k.UserKey...)
	return binary.LittleEndian.AppendUint64(dst, uint64(k.Trailer))
}

// Clone returns a copy that owns its user key.
func (k InternalKey) Clone() InternalKey {
	return InternalKey{UserKey: append([]byte(nil), k.UserKey...), Trailer: k.Trailer}
}

// String prints the key for diagnostics: user key (quoted), seq and kind.
func (k InternalKey) String() string {
	if k.IsExclusiveSentinel() {
		return fmt.Sprintf("%q#sentinel", k.UserKey)
	}
	return fmt.Sprintf("%q#%d,%s", k.UserKey, k.SeqNum(), k.Kind())
}

// DecodeInternalKey splits an encoded internal key. ok is false when the
// encoding is shorter than a trailer. The user key aliases encoded.
func DecodeInternalKey(encoded []byte) (k InternalKey, ok bool) {
	n := len(encoded) - 8
	if n < 0 {
		return InternalKey{}, false
	}
	return InternalKey{UserKey: encoded[:n:n], Trailer: Trailer(binary.LittleEndian.Uint64(encoded[n:]))}, true
}

// CompareInternal orders internal keys: user key ascending, trailer descending.
func CompareInternal(a, b InternalKey) int {
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	switch {
	case a.Trailer > b.Trailer:
		return -1
	case a.Trailer < b.Trailer:
		return 1
	}
	return 0
}

// Separator returns a short user key s with a <= s < b (a < b required), used
// for index-block keys; it may return a itself. The result is appended to dst.
func Separator(dst, a, b []byte) []byte {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if n < len(a) && n < len(b) {
		if c := a[n]; c < 0xff && c+1 < b[n] {
			dst = append(dst, a[:n+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	return append(dst, a...)
}

// Successor returns a short user key s >= a, used for the index key of a
// table's last block; the result is appended to dst.
func Successor(dst, a []byte) []byte {
	for i, c := range a {
		if c != 0xff {
			dst = append(dst, a[:i+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	return append(dst, a...)
}
