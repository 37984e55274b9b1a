package base

// InternalIterator walks internal keys in order (user key ascending, trailer
// descending). Positioning methods return whether the iterator is now at an
// entry; when they return false, Error says whether it stopped at the end or
// on an error.
//
// Key and Value return slices that stay valid only until the next positioning
// call or Close; callers copy what they keep. An iterator is not safe for
// concurrent use.
type InternalIterator interface {
	// SeekGE moves to the first entry whose user key is >= key.
	SeekGE(key []byte) bool
	// SeekLT moves to the last entry whose user key is < key.
	SeekLT(key []byte) bool
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	Key() InternalKey
	Value() []byte
	Error() error
	Close() error
}
