package base

import (
	"fmt"
	"strconv"
	"strings"
)

// FileNum names a file in the store's directory; numbers are never reused.
type FileNum uint64

// String prints the zero-padded number used in file names.
func (n FileNum) String() string { return fmt.Sprintf("%06d", uint64(n)) }

// FileType is what a file in the store's directory holds.
type FileType int

// File types.
const (
	FileTypeLog      FileType = iota // write-ahead log: NNNNNN.log
	FileTypeTable                    // SSTable: NNNNNN.sst
	FileTypeManifest                 // version-edit log: MANIFEST-NNNNNN
	FileTypeCurrent                  // CURRENT: names the live manifest
	FileTypeLock                     // LOCK: held while a DB is open
	FileTypeTemp                     // NNNNNN.dbtmp: a file being written for an atomic rename
)

// MakeFilename returns the base name of a file of the given type and number.
func MakeFilename(t FileType, n FileNum) string {
	switch t {
	case FileTypeLog:
		return n.String() + ".log"
	case FileTypeTable:
		return n.String() + ".sst"
	case FileTypeManifest:
		return "MANIFEST-" + n.String()
	case FileTypeCurrent:
		return "CURRENT"
	case FileTypeLock:
		return "LOCK"
	case FileTypeTemp:
		return n.String() + ".dbtmp"
	}
	panic("kv: unknown file type")
}

// ParseFilename recognises a base name made by MakeFilename.
func ParseFilename(name string) (FileType, FileNum, bool) {
	switch name {
	case "CURRENT":
		return FileTypeCurrent, 0, true
	case "LOCK":
		return FileTypeLock, 0, true
	}
	if rest, ok := strings.CutPrefix(name, "MANIFEST-"); ok {
		n, err := strconv.ParseUint(rest, 10, 64)
		return FileTypeManifest, FileNum(n), err == nil
	}
	dot := strings.IndexByte(name, '.')
	if dot <= 0 {
		return 0, 0, false
	}
	n, err := strconv.ParseUint(name[:dot], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	switch name[dot:] {
	case ".log":
		return FileTypeLog, FileNum(n), true
	case ".sst":
		return FileTypeTable, FileNum(n), true
	case ".dbtmp":
		return FileTypeTemp, FileNum(n), true
	}
	return 0, 0, false
}
