package base

import (
	"errors"
	"fmt"
)

// ErrCorruption is the value every corruption error matches with errors.Is.
var ErrCorruption = errors.New("kv: corruption")

// CorruptionError says which file is damaged, where, and how. It matches
// ErrCorruption under errors.Is.
type CorruptionError struct {
	File   string // file name within the store's directory (or path), "" if unknown
	Offset int64  // byte offset of the damaged record or block; -1 if unknown
	Reason string // what was wrong: "checksum mismatch", "bad block handle", ...
}

// Error formats "kv: corruption in FILE at offset N: REASON".
func (e *CorruptionError) Error() string {
	switch {
	case e.File != "" && e.Offset >= 0:
		return fmt.Sprintf("kv: corruption in %s at offset %d: %s", e.File, e.Offset, e.Reason)
	case e.File != "":
		return fmt.Sprintf("kv: corruption in %s: %s", e.File, e.Reason)
	}
	return "kv: corruption: " + e.Reason
}

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// Corruptf builds a CorruptionError.
func Corruptf(file string, offset int64, format string, args ...any) error {
	return &CorruptionError{File: file, Offset: offset, Reason: fmt.Sprintf(format, args...)}
}

// WithFile fills in the file name (and, when the error lacks one, the
// offset base) of a CorruptionError produced by code that did not know it.
// Other errors are returned unchanged.
func WithFile(err error, file string) error {
	var ce *CorruptionError
	if errors.As(err, &ce) && ce.File == "" {
		c := *ce
		c.File = file
		return &c
	}
	return err
}
