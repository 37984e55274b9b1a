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

// ParseFilename recognises a base name made by MakeFilename, and only such
// a name: the number must be written exactly as MakeFilename writes it (at
// least six digits, zero-padded, no further leading zeros), so that "5.sst"
// or "2024.log" (a user's files, perhaps) are not taken for the store's own.
// The store removes only files whose names it recognises.
func ParseFilename(name string) (FileType, FileNum, bool) {
	typ, num, ok := parseFilename(name)
	if !ok || MakeFilename(typ, num) != name {
		return 0, 0, false
	}
	return typ, num, true
}

func parseFilename(name string) (FileType, FileNum, bool) {
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

// IsStoreTrace reports whether a directory entry looks like a file of a
// key-value store, this one's or another LevelDB-family store's, whether or
// not its name is canonical: CURRENT, LOCK, MANIFEST-*, OPTIONS*, and names
// ending in .log, .sst, .ldb or .dbtmp. Open refuses to create a new store in
// a directory holding any such file (other than what an interrupted creation
// of this store leaves), so that it never writes over another store.
func IsStoreTrace(name string) bool {
	switch {
	case name == "CURRENT", name == "LOCK",
		strings.HasPrefix(name, "MANIFEST-"), strings.HasPrefix(name, "OPTIONS"):
		return true
	}
	for _, ext := range []string{".log", ".sst", ".ldb", ".dbtmp"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}
