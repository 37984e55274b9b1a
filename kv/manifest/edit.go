package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warpkit/warpkit/kv/internal/base"
)

// NumLevels is the number of levels.
const NumLevels = 7

// Comparator names the key order; stored in the manifest and checked.
const Comparator = "warpkit.bytewise"

const (
	tagComparator   = 1
	tagLogNumber    = 2
	tagNextFileNum  = 3
	tagLastSequence = 4
	tagDeletedFile  = 6
	tagNewFile      = 7
	tagWAL          = 8
	tagSealedWAL    = 9
	tagFormat       = 10
)

// FormatTracksWALs is the manifest format in which every write-ahead log the
// store writes is recorded (tag 8) before the first record goes into it, and
// sealed with its final size (tag 9) once it is complete. In a manifest
// without it (written by an older build) Open can only find logs by listing
// the directory. Every snapshot edit records the format.
const FormatTracksWALs = 2

// SealedWAL records that a write-ahead log is complete and synced: it holds
// exactly Size bytes and nothing is ever written to it again.
type SealedWAL struct {
	Num  base.FileNum
	Size int64
}

// DeletedFile names a table removed from a level.
type DeletedFile struct {
	Level   int
	FileNum base.FileNum
}

// NewFile is a table added to a level.
type NewFile struct {
	Level int
	Meta  *FileMetadata
}

// VersionEdit is the difference between two versions.
type VersionEdit struct {
	Comparator   string
	LogNum       base.FileNum // 0: unchanged
	NextFileNum  base.FileNum // 0: unchanged
	LastSeq      base.SeqNum  // 0: unchanged
	DeletedFiles []DeletedFile
	NewFiles     []NewFile
	// WALs are logs the store has created and will write: they hold
	// unflushed data until LogNum passes them.
	WALs []base.FileNum
	// SealedWALs are logs that are complete, with their final sizes.
	SealedWALs []SealedWAL
	// Format, when non-zero, is the manifest format (FormatTracksWALs).
	Format uint64
}

// Encode appends the edit's encoding to dst.
func (e *VersionEdit) Encode(dst []byte) []byte {
	putBytes := func(b []byte) {
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	if e.Comparator != "" {
		dst = binary.AppendUvarint(dst, tagComparator)
		putBytes([]byte(e.Comparator))
	}
	if e.LogNum != 0 {
		dst = binary.AppendUvarint(dst, tagLogNumber)
		dst = binary.AppendUvarint(dst, uint64(e.LogNum))
	}
	if e.NextFileNum != 0 {
		dst = binary.AppendUvarint(dst, tagNextFileNum)
		dst = binary.AppendUvarint(dst, uint64(e.NextFileNum))
	}
	if e.LastSeq != 0 {
		dst = binary.AppendUvarint(dst, tagLastSequence)
		dst = binary.AppendUvarint(dst, uint64(e.LastSeq))
	}
	if e.Format != 0 {
		dst = binary.AppendUvarint(dst, tagFormat)
		dst = binary.AppendUvarint(dst, e.Format)
	}
	for _, n := range e.WALs {
		dst = binary.AppendUvarint(dst, tagWAL)
		dst = binary.AppendUvarint(dst, uint64(n))
	}
	for _, w := range e.SealedWALs {
		dst = binary.AppendUvarint(dst, tagSealedWAL)
		dst = binary.AppendUvarint(dst, uint64(w.Num))
		dst = binary.AppendUvarint(dst, uint64(w.Size))
	}
	for _, d := range e.DeletedFiles {
		dst = binary.AppendUvarint(dst, tagDeletedFile)
		dst = binary.AppendUvarint(dst, uint64(d.Level))
		dst = binary.AppendUvarint(dst, uint64(d.FileNum))
	}
	for _, n := range e.NewFiles {
		m := n.Meta
		dst = binary.AppendUvarint(dst, tagNewFile)
		dst = binary.AppendUvarint(dst, uint64(n.Level))
		dst = binary.AppendUvarint(dst, uint64(m.FileNum))
		dst = binary.AppendUvarint(dst, m.Size)
		putBytes(m.Smallest.Append(nil))
		putBytes(m.Largest.Append(nil))
		dst = binary.AppendUvarint(dst, uint64(m.SmallestSeq))
		dst = binary.AppendUvarint(dst, uint64(m.LargestSeq))
		var flags uint64
		if m.HasRangeDels {
			flags |= 1
		}
		dst = binary.AppendUvarint(dst, flags)
	}
	return dst
}

var errBadEdit = errors.New("malformed version edit")

// Decode parses an edit. Errors say what was wrong; the caller adds the file
// and offset.
func (e *VersionEdit) Decode(b []byte) error {
	getUvarint := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errBadEdit
		}
		b = b[n:]
		return v, nil
	}
	getBytes := func() ([]byte, error) {
		n, err := getUvarint()
		if err != nil || n > uint64(len(b)) {
			return nil, errBadEdit
		}
		out := append([]byte(nil), b[:n]...)
		b = b[n:]
		return out, nil
	}
	getKey := func() (base.InternalKey, error) {
		raw, err := getBytes()
		if err != nil {
			return base.InternalKey{}, err
		}
		k, ok := base.DecodeInternalKey(raw)
		if !ok {
			return base.InternalKey{}, errBadEdit
		}
		return k, nil
	}
	getLevel := func() (int, error) {
		l, err := getUvarint()
		if err != nil || l >= NumLevels {
			return 0, fmt.Errorf("%w: level out of range", errBadEdit)
		}
		return int(l), nil
	}
	for len(b) > 0 {
		tag, err := getUvarint()
		if err != nil {
			return err
		}
		switch tag {
		case tagComparator:
			c, err := getBytes()
			if err != nil {
				return err
			}
			e.Comparator = string(c)
		case tagLogNumber:
			v, err := getUvarint()
			if err != nil {
				return err
			}
			e.LogNum = base.FileNum(v)
		case tagNextFileNum:
			v, err := getUvarint()
			if err != nil {
				return err
			}
			e.NextFileNum = base.FileNum(v)
		case tagLastSequence:
			v, err := getUvarint()
			if err != nil {
				return err
			}
			e.LastSeq = base.SeqNum(v)
		case tagFormat:
			v, err := getUvarint()
			if err != nil {
				return err
			}
			e.Format = v
		case tagWAL:
			v, err := getUvarint()
			if err != nil {
				return err
			}
			e.WALs = append(e.WALs, base.FileNum(v))
		case tagSealedWAL:
			n, err := getUvarint()
			if err != nil {
				return err
			}
			size, err := getUvarint()
			if err != nil || size > 1<<62 {
				return errBadEdit
			}
			e.SealedWALs = append(e.SealedWALs, SealedWAL{Num: base.FileNum(n), Size: int64(size)})
		case tagDeletedFile:
			l, err := getLevel()
			if err != nil {
				return err
			}
			n, err := getUvarint()
			if err != nil {
				return err
			}
			e.DeletedFiles = append(e.DeletedFiles, DeletedFile{Level: l, FileNum: base.FileNum(n)})
		case tagNewFile:
			l, err := getLevel()
			if err != nil {
				return err
			}
			m := &FileMetadata{}
			var v uint64
			if v, err = getUvarint(); err != nil {
				return err
			}
			m.FileNum = base.FileNum(v)
			if m.Size, err = getUvarint(); err != nil {
				return err
			}
			if m.Smallest, err = getKey(); err != nil {
				return err
			}
			if m.Largest, err = getKey(); err != nil {
				return err
			}
			if v, err = getUvarint(); err != nil {
				return err
			}
			m.SmallestSeq = base.SeqNum(v)
			if v, err = getUvarint(); err != nil {
				return err
			}
			m.LargestSeq = base.SeqNum(v)
			if v, err = getUvarint(); err != nil {
				return err
			}
			m.HasRangeDels = v&1 != 0
			if base.CompareInternal(m.Smallest, m.Largest) > 0 {
				return fmt.Errorf("%w: table %s bounds out of order", errBadEdit, m.FileNum)
			}
			e.NewFiles = append(e.NewFiles, NewFile{Level: l, Meta: m})
		default:
			return fmt.Errorf("%w: unknown tag %d", errBadEdit, tag)
		}
	}
	return nil
}
