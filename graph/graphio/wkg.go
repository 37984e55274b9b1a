package graphio

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// The .wkg format: a graph's CSR, binary, so that a benchmark loads a
// generated or parsed graph at memory speed instead of parsing text again.
// All numbers little-endian.
//
//	header   magic "WKGRAPH\x00" (8 bytes), version uint32 (1),
//	         flags uint32 (bit 0: directed, bit 1: weighted),
//	         vertices uint64, entries uint64
//	offsets  vertices+1 × uint64: entry range of each source vertex,
//	         starting at 0, non-decreasing, ending at entries
//	dst      entries × uint32, each < vertices
//	weights  entries × float64 (weighted only)
//	crc      uint32: CRC-32C (Castagnoli) of everything before it
//
// Entries are grouped by source; within a source they keep the order they
// had in the Edges written.
const (
	wkgMagic   = "WKGRAPH\x00"
	wkgVersion = 1
	wkgHeader  = 32
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteWKG writes e in the .wkg format.
func WriteWKG(w io.Writer, e *Edges) error {
	n, m := e.NumVertices, e.Len()
	offsets := make([]uint64, n+1)
	for _, s := range e.Src {
		if int(s) >= n {
			return fmt.Errorf("graphio: WriteWKG: source %d of %d vertices", s, n)
		}
		offsets[s+1]++
	}
	for v := range n {
		offsets[v+1] += offsets[v]
	}
	order := make([]int, m) // entry positions grouped by source, stable
	fill := append([]uint64(nil), offsets[:n]...)
	for i, s := range e.Src {
		order[fill[s]] = i
		fill[s]++
	}
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<20)
	var buf [8]byte
	put32 := func(v uint32) { binary.LittleEndian.PutUint32(buf[:4], v); bw.Write(buf[:4]) }
	put64 := func(v uint64) { binary.LittleEndian.PutUint64(buf[:], v); bw.Write(buf[:]) }
	var flags uint32
	if e.Directed {
		flags |= 1
	}
	if e.W != nil {
		flags |= 2
	}
	bw.WriteString(wkgMagic)
	put32(wkgVersion)
	put32(flags)
	put64(uint64(n))
	put64(uint64(m))
	for _, o := range offsets {
		put64(o)
	}
	for _, i := range order {
		if int(e.Dst[i]) >= n {
			return fmt.Errorf("graphio: WriteWKG: destination %d of %d vertices", e.Dst[i], n)
		}
		put32(e.Dst[i])
	}
	if e.W != nil {
		for _, i := range order {
			put64(math.Float64bits(e.W[i]))
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(buf[:4], crc.Sum32())
	_, err := w.Write(buf[:4])
	return err
}

// ReadWKG reads a .wkg graph (entries grouped by source), checking its
// checksum, sizes and every offset and destination; damage is a
// *ParseError (ErrFormat) and returns nothing.
func ReadWKG(r io.Reader, opts ReadOptions) (*Edges, error) {
	bad := func(format string, args ...any) error {
		return &ParseError{Format: "wkg", Msg: fmt.Sprintf(format, args...)}
	}
	crc := crc32.New(castagnoli)
	br := bufio.NewReaderSize(r, 1<<20)
	tr := io.TeeReader(br, crc)
	var hdr [wkgHeader]byte
	if _, err := io.ReadFull(tr, hdr[:]); err != nil {
		return nil, bad("header: %v", err)
	}
	if string(hdr[:8]) != wkgMagic {
		return nil, bad("not a .wkg file")
	}
	if v := binary.LittleEndian.Uint32(hdr[8:]); v != wkgVersion {
		return nil, bad("version %d (this reader knows %d)", v, wkgVersion)
	}
	flags := binary.LittleEndian.Uint32(hdr[12:])
	if flags&^3 != 0 {
		return nil, bad("unknown flags %#x", flags)
	}
	n64, m64 := binary.LittleEndian.Uint64(hdr[16:]), binary.LittleEndian.Uint64(hdr[24:])
	if n64 > maxID+1 || m64 > 1<<40 {
		return nil, bad("%d vertices, %d entries: out of range", n64, m64)
	}
	n, m := int(n64), int(m64)
	if err := opts.checkVertices(n); err != nil {
		return nil, err
	}
	e := &Edges{NumVertices: n, Directed: flags&1 != 0}
	// Read in chunks, so that a header promising more than the file holds
	// fails at the file's end rather than allocating the promise.
	chunk := make([]byte, 1<<16)
	words := func(count, size int, what string, each func(i int, b []byte) error) error {
		for i := 0; i < count; {
			k := min(count-i, len(chunk)/size)
			if _, err := io.ReadFull(tr, chunk[:k*size]); err != nil {
				return bad("%s: %v", what, err)
			}
			for j := range k {
				if err := each(i+j, chunk[j*size:(j+1)*size]); err != nil {
					return err
				}
			}
			i += k
		}
		return nil
	}
	offsets := make([]uint64, 0, min(n+1, 1<<20))
	err := words(n+1, 8, "offsets", func(v int, b []byte) error {
		o := binary.LittleEndian.Uint64(b)
		if v == 0 && o != 0 || v > 0 && o < offsets[v-1] || o > m64 {
			return bad("offset %d of vertex %d out of order or past %d entries", o, v, m)
		}
		offsets = append(offsets, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if offsets[n] != m64 {
		return nil, bad("offsets end at %d, the header says %d entries", offsets[n], m)
	}
	e.Src, e.Dst = make([]uint32, 0, min(m, 1<<24)), make([]uint32, 0, min(m, 1<<24))
	v := 0
	err = words(m, 4, "destinations", func(i int, b []byte) error {
		for uint64(i) >= offsets[v+1] {
			v++
		}
		d := binary.LittleEndian.Uint32(b)
		if int(d) >= n {
			return bad("destination %d of %d vertices", d, n)
		}
		e.Src, e.Dst = append(e.Src, uint32(v)), append(e.Dst, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if flags&2 != 0 {
		e.W = make([]float64, 0, min(m, 1<<24))
		err = words(m, 8, "weights", func(_ int, b []byte) error {
			e.W = append(e.W, math.Float64frombits(binary.LittleEndian.Uint64(b)))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var buf [4]byte
	want := crc.Sum32()
	if _, err := io.ReadFull(br, buf[:]); err != nil {
		return nil, bad("checksum: %v", err)
	}
	if got := binary.LittleEndian.Uint32(buf[:]); got != want {
		return nil, bad("checksum mismatch (%#08x, computed %#08x)", got, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, bad("bytes after the checksum")
	}
	return opts.finish(e)
}
