package vfs

// WritebackStarter is implemented by files that can start writing their
// dirty pages to the device without making them durable: on Linux, OS
// files (sync_file_range(2), SYNC_FILE_RANGE_WAIT_BEFORE|WRITE). Sync is
// still what makes data durable.
type WritebackStarter interface {
	// StartWriteback waits for the writeback of the file's first upTo
	// bytes that earlier calls started, then starts writing back the rest
	// of them that is dirty, and returns.
	StartWriteback(upTo int64) error
}

// NewSyncingFile returns f, starting the writeback of its data every
// bytesPerSync bytes written (Pebble's and RocksDB's bytes_per_sync): a
// table written at hundreds of MB/s then reaches the device as it is
// written, not in one burst at its Sync, which keeps the final Sync short
// and dirty pages from piling up behind another file's sync (a flush's,
// which writes wait for). It returns f itself when f cannot start a
// writeback (MemFS, the fault and read-only wrappers) or bytesPerSync is
// not positive. The returned file keeps f's VectorWriter.
//
// The writeback is advice: should StartWriteback fail, the file stops
// calling it and writes on (an I/O error surfaces at Sync, which is what
// the store's durability rests on).
func NewSyncingFile(f File, bytesPerSync int64) File {
	wb, ok := f.(WritebackStarter)
	if !ok || bytesPerSync <= 0 {
		return f
	}
	s := &syncingFile{File: f, wb: wb, every: bytesPerSync}
	if vw, ok := f.(VectorWriter); ok {
		return syncingVectorFile{s, vw}
	}
	return s
}

// syncingFile is NewSyncingFile's file.
type syncingFile struct {
	File
	wb      WritebackStarter
	every   int64 // bytes between writebacks
	written int64 // bytes written so far
	started int64 // bytes whose writeback has been started
	failed  bool  // StartWriteback failed: no more
}

func (f *syncingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.wrote(int64(n))
	return n, err
}

// wrote counts n more bytes written and starts the writeback of whole
// multiples of f.every once that many have been written since the last.
func (f *syncingFile) wrote(n int64) {
	f.written += n
	if f.failed || f.written-f.started < f.every {
		return
	}
	upTo := f.written - f.written%f.every
	if err := f.wb.StartWriteback(upTo); err != nil {
		f.failed = true
		return
	}
	f.started = upTo
}

// syncingVectorFile is a syncingFile over a VectorWriter.
type syncingVectorFile struct {
	*syncingFile
	vw VectorWriter
}

func (f syncingVectorFile) WriteVectors(bufs [][]byte) (int64, error) {
	n, err := f.vw.WriteVectors(bufs)
	f.wrote(n)
	return n, err
}
