package graphio

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// pairs lists e's entries as "s>d" (or "s>d:w").
func pairs(e *Edges) string {
	var b strings.Builder
	for i := range e.Src {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d>%d", e.Src[i], e.Dst[i])
		if e.W != nil {
			fmt.Fprintf(&b, ":%g", e.W[i])
		}
	}
	return b.String()
}

// withChunks runs f with the parsers' chunks at each of several sizes (down
// to a line or less per chunk), so that every test covers the cuts.
func withChunks(t *testing.T, f func(t *testing.T)) {
	defer func(n int) { chunkBytes = n }(chunkBytes)
	for _, n := range []int{4 << 20, 64, 7, 1} {
		chunkBytes = n
		t.Run(fmt.Sprint(n), f)
	}
}

func TestReadMatrixMarket(t *testing.T) { withChunks(t, testReadMatrixMarket) }

func testReadMatrixMarket(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		opts     ReadOptions
		n        int
		directed bool
		want     string
	}{
		{"pattern general", "%%MatrixMarket matrix coordinate pattern general\n% a comment\n\n3 3 3\n1 2\n2 3\n3 1\n", ReadOptions{}, 3, true, "0>1 1>2 2>0"},
		{"real symmetric, CRLF, comments between", "%%MatrixMarket matrix coordinate real symmetric\r\n4 4 2\r\n% mid\r\n2 1 0.5\r\n\r\n4 3 -2e1\r\n", ReadOptions{}, 4, false, "1>0:0.5 3>2:-20"},
		{"symmetrize and dedup", "%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n2 1 7\n3 1 1\n3 3 4\n", ReadOptions{Symmetrize: true, Dedup: true}, 3, false, "0>1:7 0>2:1 1>0:7 2>0:1 2>2:4"},
		{"drop self-loops", "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n2 1\n3 3\n3 2\n", ReadOptions{DropSelfLoops: true, Symmetrize: true}, 3, false, "1>0 2>1 0>1 1>2"},
		{"skew-symmetric mirrors negated", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n", ReadOptions{Symmetrize: true, Dedup: true}, 2, false, "0>1:-3 1>0:3"},
		{"banner case, rectangular", "%%matrixmarket MATRIX Coordinate Pattern General\n2 5 1\n1 5\n", ReadOptions{}, 5, true, "0>4"},
	} {
		e, err := ReadMatrixMarket(strings.NewReader(tc.in), tc.opts)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := pairs(e); got != tc.want || e.NumVertices != tc.n || e.Directed != tc.directed {
			t.Errorf("%s: %d vertices, directed %v, %s; want %d, %v, %s", tc.name, e.NumVertices, e.Directed, got, tc.n, tc.directed, tc.want)
		}
	}
}

func TestReadSNAP(t *testing.T) { withChunks(t, testReadSNAP) }

func testReadSNAP(t *testing.T) {
	e, err := ReadSNAP(strings.NewReader("# Directed graph\n# Nodes: 4\n0\t1\n1 2\n\n  3   0  \n1\t2\n"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pairs(e); got != "0>1 1>2 3>0 1>2" || e.NumVertices != 4 || !e.Directed {
		t.Fatalf("%d vertices, %s", e.NumVertices, got)
	}
	e, err = ReadSNAP(strings.NewReader("0 1 2.5\n1 0 1\n1 1 9\n0 1 3\n"), ReadOptions{Dedup: true, DropSelfLoops: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := pairs(e); got != "0>1:3 1>0:1" || e.SelfLoops != 1 || e.Duplicates != 1 {
		t.Fatalf("%s, %d self-loops, %d duplicates", got, e.SelfLoops, e.Duplicates)
	}
	if e, err := ReadSNAP(strings.NewReader("# nothing\n"), ReadOptions{}); err != nil || e.NumVertices != 0 || e.Len() != 0 {
		t.Fatalf("an empty list: %v, %v", e, err)
	}
}

func TestReadMETIS(t *testing.T) {
	// A triangle 1-2-3 and a vertex 4 without neighbours (blank line),
	// comments between.
	in := "% a comment\n4 3\n2 3\n1 3\n% here too\n1 2\n\n"
	e, err := ReadMETIS(strings.NewReader(in), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pairs(e); got != "0>1 0>2 1>0 1>2 2>0 2>1" || e.NumVertices != 4 || e.Directed {
		t.Fatalf("%d vertices, %s", e.NumVertices, got)
	}
	// fmt 011 (vertex and edge weights), ncon 2; fmt 100 (sizes).
	e, err = ReadMETIS(strings.NewReader("2 1 011 2\n5 6 2 9\n7 8 1 9\n"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pairs(e); got != "0>1:9 1>0:9" {
		t.Fatalf("weighted: %s", got)
	}
	e, err = ReadMETIS(strings.NewReader("2 1 100\n3 2\n4 1\n"), ReadOptions{})
	if err != nil || pairs(e) != "0>1 1>0" {
		t.Fatalf("sizes: %v, %v", e, err)
	}
}

// TestReadErrors: every bad input is a *ParseError (ErrFormat) naming its
// line, or ErrTooLarge; none returns a graph.
func TestReadErrors(t *testing.T) { withChunks(t, testReadErrors) }

func testReadErrors(t *testing.T) {
	mm := "%%MatrixMarket matrix coordinate pattern general\n"
	for _, tc := range []struct {
		name, format, in string
		opts             ReadOptions
		line             int // 0: ErrTooLarge expected
	}{
		{"mm empty", "mtx", "", ReadOptions{}, -1},
		{"mm banner", "mtx", "%%MatrixMarket matrix array real general\n2 2\n", ReadOptions{}, 1},
		{"mm field", "mtx", "%%MatrixMarket matrix coordinate complex general\n", ReadOptions{}, 1},
		{"mm symmetry", "mtx", "%%MatrixMarket matrix coordinate real hermitian\n", ReadOptions{}, 1},
		{"mm size", "mtx", mm + "3 3\n", ReadOptions{}, 2},
		{"mm index", "mtx", mm + "3 3 1\n4 1\n", ReadOptions{}, 3},
		{"mm zero index", "mtx", mm + "3 3 1\n0 1\n", ReadOptions{}, 3},
		{"mm too many", "mtx", mm + "3 3 1\n1 2\n2 3\n", ReadOptions{}, 4},
		{"mm too few", "mtx", mm + "3 3 3\n1 2\n", ReadOptions{}, 3},
		{"mm fields", "mtx", mm + "3 3 1\n1 2 3\n", ReadOptions{}, 3},
		{"mm value", "mtx", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 NaN\n", ReadOptions{}, 3},
		{"mm skew diagonal", "mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 2 1\n", ReadOptions{}, 3},
		{"mm max vertices", "mtx", mm + "30 30 0\n", ReadOptions{MaxVertices: 10}, 0},
		{"snap fields", "snap", "0 1\n1\n", ReadOptions{}, 2},
		{"snap mixed columns", "snap", "0 1\n1 2 3\n", ReadOptions{}, 2},
		{"snap negative", "snap", "0 -1\n", ReadOptions{}, 1},
		{"snap huge id", "snap", "0 4294967295\n", ReadOptions{}, 1},
		{"snap weight", "snap", "0 1 x\n", ReadOptions{}, 1},
		{"snap max vertices", "snap", "0 1\n5 6\n", ReadOptions{MaxVertices: 4}, 0},
		{"metis header", "metis", "3\n", ReadOptions{}, 1},
		{"metis fmt", "metis", "2 1 2\n", ReadOptions{}, 1},
		{"metis ncon", "metis", "2 1 1 3\n", ReadOptions{}, 1},
		{"metis neighbour", "metis", "2 1\n3\n1\n", ReadOptions{}, 2},
		{"metis weight pairs", "metis", "2 1 1\n2\n1 5\n", ReadOptions{}, 2},
		{"metis missing vertices", "metis", "3 1\n2\n1\n", ReadOptions{}, 3},
		{"metis extra line", "metis", "2 1\n2\n1\n1\n", ReadOptions{}, 4},
		{"metis edge count", "metis", "2 2\n2\n1\n", ReadOptions{}, -1},
		{"metis max vertices", "metis", "100 0\n", ReadOptions{MaxVertices: 99}, 0},
	} {
		var e *Edges
		var err error
		switch tc.format {
		case "mtx":
			e, err = ReadMatrixMarket(strings.NewReader(tc.in), tc.opts)
		case "snap":
			e, err = ReadSNAP(strings.NewReader(tc.in), tc.opts)
		case "metis":
			e, err = ReadMETIS(strings.NewReader(tc.in), tc.opts)
		}
		if e != nil {
			t.Errorf("%s: a graph returned with error %v", tc.name, err)
		}
		if tc.line == 0 {
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: %v, want ErrTooLarge", tc.name, err)
			}
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrFormat) || tc.line > 0 && pe.Line != tc.line {
			t.Errorf("%s: %v, want a parse error at line %d", tc.name, err, tc.line)
		}
	}
}

// TestReadFile: the format follows the extension, gzip is undone, and an
// unknown extension is refused.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	z.Write([]byte("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n"))
	z.Close()
	for _, tc := range []struct {
		path string
		want string
	}{
		{write("a.mtx.gz", gz.Bytes()), "0>1 1>0 1>2 2>1"},
		{write("b.graph", []byte("2 1\n2\n1\n")), "0>1 1>0"},
		{write("c.edges", []byte("1 0\n")), "0>1 1>0"},
	} {
		e, err := ReadFile(tc.path, ReadOptions{Symmetrize: true, Dedup: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if got := pairs(e); got != tc.want {
			t.Fatalf("%s: %s, want %s", tc.path, got, tc.want)
		}
	}
	if _, err := ReadFile(write("d.csv", nil), ReadOptions{}); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("a .csv: %v", err)
	}
	if _, err := ReadFile(write("e.mtx.gz", []byte("not gzip")), ReadOptions{}); err == nil {
		t.Fatal("a .gz that is not gzip read")
	}
}

// TestLongLine: a METIS hub vertex's line longer than the read buffer.
func TestLongLine(t *testing.T) {
	const n = 300000
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d\n", n, n-1)
	for v := 2; v <= n; v++ {
		fmt.Fprintf(&b, "%d ", v)
	}
	b.WriteString("\n")
	for v := 2; v <= n; v++ {
		b.WriteString("1\n")
	}
	e, err := ReadMETIS(strings.NewReader(b.String()), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Len() != 2*(n-1) || e.Dst[n-2] != n-1 {
		t.Fatalf("%d entries", e.Len())
	}
}

// checkEdges: the invariants every reader's result holds.
func checkEdges(t *testing.T, e *Edges) {
	t.Helper()
	if len(e.Src) != len(e.Dst) || e.W != nil && len(e.W) != len(e.Src) {
		t.Fatalf("arrays of %d, %d, %d", len(e.Src), len(e.Dst), len(e.W))
	}
	for i := range e.Src {
		if int(e.Src[i]) >= e.NumVertices || int(e.Dst[i]) >= e.NumVertices {
			t.Fatalf("entry %d: %d>%d of %d vertices", i, e.Src[i], e.Dst[i], e.NumVertices)
		}
	}
}

// checkRead: a reader either fails with ErrFormat or ErrTooLarge, or
// returns edges that hold the invariants.
func checkRead(t *testing.T, e *Edges, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error %v is neither ErrFormat nor ErrTooLarge", err)
		}
		return
	}
	checkEdges(t, e)
}

func fuzzOptions(flags uint8) ReadOptions {
	return ReadOptions{Symmetrize: flags&1 != 0, DropSelfLoops: flags&2 != 0, Dedup: flags&4 != 0, MaxVertices: 1 << 20}
}

func FuzzReadMatrixMarket(f *testing.F) {
	f.Add([]byte("%%MatrixMarket matrix coordinate real symmetric\n4 4 2\n2 1 0.5\n4 3 -2\n"), uint8(7))
	f.Add([]byte("%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 2\n2 3\n3 1\n"), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, flags uint8) {
		defer func(n int) { chunkBytes = n }(chunkBytes)
		chunkBytes = 1 + int(flags>>3)*5 // chunks cut anywhere
		e, err := ReadMatrixMarket(bytes.NewReader(in), fuzzOptions(flags))
		checkRead(t, e, err)
	})
}

func FuzzReadSNAP(f *testing.F) {
	f.Add([]byte("# c\n0 1\n1 2\n"), uint8(5))
	f.Add([]byte("0 1 2.5\n1 0 1\n"), uint8(7))
	f.Fuzz(func(t *testing.T, in []byte, flags uint8) {
		defer func(n int) { chunkBytes = n }(chunkBytes)
		chunkBytes = 1 + int(flags>>3)*5 // chunks cut anywhere
		e, err := ReadSNAP(bytes.NewReader(in), fuzzOptions(flags))
		checkRead(t, e, err)
	})
}

func FuzzReadMETIS(f *testing.F) {
	f.Add([]byte("4 3\n2 3\n1 3\n1 2\n\n"), uint8(0))
	f.Add([]byte("2 1 011 2\n5 6 2 9\n7 8 1 9\n"), uint8(6))
	f.Fuzz(func(t *testing.T, in []byte, flags uint8) {
		e, err := ReadMETIS(bytes.NewReader(in), fuzzOptions(flags))
		checkRead(t, e, err)
	})
}

// TestFeistel: the vertex permutation is a bijection at every width.
func TestFeistel(t *testing.T) {
	for bits := 1; bits <= 16; bits++ {
		f := newFeistel(bits, uint64(bits))
		seen := make([]bool, 1<<bits)
		for x := range uint32(1 << bits) {
			y := f.apply(x)
			if int(y) >= len(seen) || seen[y] {
				t.Fatalf("%d bits: %d maps to %d, out of range or taken", bits, x, y)
			}
			seen[y] = true
		}
	}
}

// TestRMAT: the counts, the range, the skew Graph500's parameters give, and
// the same graph for a seed whatever GOMAXPROCS is.
func TestRMAT(t *testing.T) {
	e, err := RMAT(12, 8, RMATOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkEdges(t, e)
	if e.NumVertices != 4096 || e.Len() != 8*4096 || !e.Directed {
		t.Fatalf("%d vertices, %d entries", e.NumVertices, e.Len())
	}
	deg := make([]int, e.NumVertices)
	for _, s := range e.Src {
		deg[s]++
	}
	if maxDeg := slices.Max(deg); maxDeg < 20*8 {
		t.Fatalf("max out-degree %d: no skew (mean 8)", maxDeg)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	again, _ := RMAT(12, 8, RMATOptions{Seed: 3})
	if !slices.Equal(again.Src, e.Src) || !slices.Equal(again.Dst, e.Dst) {
		t.Fatal("another GOMAXPROCS, another graph")
	}
	other, _ := RMAT(12, 8, RMATOptions{Seed: 4})
	if slices.Equal(other.Src, e.Src) {
		t.Fatal("another seed, the same graph")
	}
	for _, bad := range []struct{ scale, ef int }{{0, 1}, {32, 1}, {10, 0}} {
		if _, err := RMAT(bad.scale, bad.ef, RMATOptions{}); err == nil {
			t.Errorf("RMAT(%d, %d) took it", bad.scale, bad.ef)
		}
	}
	if _, err := RMAT(4, 1, RMATOptions{A: 0.9, B: 0.1, C: 0.1}); err == nil {
		t.Error("probabilities over 1 taken")
	}
}

// TestRGG: every entry joins points closer than the radius, every such pair
// is found (against all pairs), both directions, and the mean degree is the
// model's (0.95·ln n, less at the square's edges).
func TestRGG(t *testing.T) {
	const k = 11
	e, err := RGG(k, 9)
	if err != nil {
		t.Fatal(err)
	}
	checkEdges(t, e)
	n := 1 << k
	// Regenerate the points to check against all pairs.
	xs, ys := rggPoints(k, 9)
	r := 0.55 * math.Sqrt(math.Log(float64(n))/float64(n))
	want := map[[2]uint32]bool{}
	for i := range n {
		for j := range n {
			if dx, dy := xs[i]-xs[j], ys[i]-ys[j]; i != j && dx*dx+dy*dy < r*r {
				want[[2]uint32{uint32(i), uint32(j)}] = true
			}
		}
	}
	if e.Len() != len(want) {
		t.Fatalf("%d entries, all pairs give %d", e.Len(), len(want))
	}
	for i := range e.Src {
		if !want[[2]uint32{e.Src[i], e.Dst[i]}] {
			t.Fatalf("entry %d>%d is not a close pair", e.Src[i], e.Dst[i])
		}
	}
	mean := float64(e.Len()) / float64(n)
	if model := 0.95 * math.Log(float64(n)); mean < 0.8*model || mean > 1.05*model {
		t.Fatalf("mean degree %.2f, model %.2f", mean, model)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	again, _ := RGG(k, 9)
	if !slices.Equal(again.Src, e.Src) || !slices.Equal(again.Dst, e.Dst) {
		t.Fatal("another GOMAXPROCS, another graph")
	}
}

// TestWriteSNAPRoundTrip: what WriteSNAP writes, ReadSNAP reads back the
// same (weights included); DegreeStats counts it.
func TestWriteSNAPRoundTrip(t *testing.T) {
	e, _ := RMAT(8, 4, RMATOptions{Seed: 1})
	e.W = make([]float64, e.Len())
	for i := range e.W {
		e.W[i] = float64(i) / 3
	}
	var buf bytes.Buffer
	if err := WriteSNAP(&buf, e); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSNAP(&buf, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Src, e.Src) || !slices.Equal(back.Dst, e.Dst) || !slices.Equal(back.W, e.W) {
		t.Fatal("the entries changed on the way")
	}
	d := DegreeStats(e)
	if d.Entries != 4*256 || d.Vertices != 256 || d.Mean != 4 || d.Max < d.Min || d.Isolated == 0 {
		t.Fatalf("degree stats %+v", d)
	}
	if z := DegreeStats(&Edges{}); z.Vertices != 0 || z.Entries != 0 {
		t.Fatalf("empty: %+v", z)
	}
}

// undirectedOK: every entry's reverse is present, no self-loop.
func undirectedOK(t *testing.T, e *Edges) {
	t.Helper()
	set := make(map[uint64]bool, e.Len())
	for i := range e.Src {
		if e.Src[i] == e.Dst[i] {
			t.Fatalf("self-loop at %d", e.Src[i])
		}
		set[uint64(e.Src[i])<<32|uint64(e.Dst[i])] = true
	}
	for i := range e.Src {
		if !set[uint64(e.Dst[i])<<32|uint64(e.Src[i])] {
			t.Fatalf("%d>%d without its reverse", e.Src[i], e.Dst[i])
		}
	}
}

// TestRoad: the vertex count, the mean degree asked for, degree-2 bends
// and intersections of at most 4, both directions.
func TestRoad(t *testing.T) {
	for _, avg := range []float64{2.1, 2.4} {
		e, err := Road(20000, avg, 5)
		if err != nil {
			t.Fatal(err)
		}
		checkEdges(t, e)
		undirectedOK(t, e)
		d := DegreeStats(e)
		if e.NumVertices != 20000 || math.Abs(d.Mean-avg) > 0.05*avg || d.Max > 4 || d.Isolated > e.NumVertices/10 {
			t.Fatalf("degree %.2f: %+v", avg, d)
		}
	}
	for _, bad := range [][2]float64{{8, 2.2}, {1000, 2}, {1000, 3}} {
		if _, err := Road(int(bad[0]), bad[1], 1); err == nil {
			t.Errorf("Road(%v) took it", bad)
		}
	}
}

// TestMesh3D: the entries are exactly the close pairs (against all pairs),
// both directions, and the mean degree near the asked one (less at the
// cube's faces).
func TestMesh3D(t *testing.T) {
	const n = 1500
	e, err := Mesh3D(n, 20, 3)
	if err != nil {
		t.Fatal(err)
	}
	checkEdges(t, e)
	undirectedOK(t, e)
	pts, r := mesh3DPoints(n, 3), mesh3DRadius(n, 20)
	close := 0
	for i := range n {
		for j := range n {
			dx, dy, dz := pts[0][i]-pts[0][j], pts[1][i]-pts[1][j], pts[2][i]-pts[2][j]
			if i != j && dx*dx+dy*dy+dz*dz < r*r {
				close++
			}
		}
	}
	if close != e.Len() {
		t.Fatalf("%d entries, all pairs give %d", e.Len(), close)
	}
	for i := range e.Src {
		s, d := e.Src[i], e.Dst[i]
		dx, dy, dz := pts[0][s]-pts[0][d], pts[1][s]-pts[1][d], pts[2][s]-pts[2][d]
		if dx*dx+dy*dy+dz*dz >= r*r {
			t.Fatalf("entry %d>%d is not a close pair", s, d)
		}
	}
	if d := DegreeStats(e); d.Mean < 0.5*20 || d.Mean > 1.05*20 {
		t.Fatalf("mean degree %.2f, asked 20", d.Mean)
	}
	big, _ := Mesh3D(100_000, 48, 3)
	if d := DegreeStats(big); d.Mean < 0.75*48 || d.Mean > 48 {
		t.Fatalf("100K points: mean degree %.2f, asked 48", d.Mean)
	}
	if _, err := Mesh3D(1, 5, 1); err == nil {
		t.Error("Mesh3D of one point taken")
	}
}

// TestStandIns: the registry is consistent, and the small stand-ins come
// within 15% of their dataset's entries (the spec's Table 5.1 target).
func TestStandIns(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range StandIns() {
		if seen[s.Name] || s.Vertices <= 0 || s.Entries <= s.Vertices || s.Generate == nil {
			t.Fatalf("stand-in %+v", s)
		}
		seen[s.Name] = true
		if s.Entries > 2_000_000 || testing.Short() && s.Entries > 300_000 {
			continue
		}
		e, err := s.Generate(1)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		checkEdges(t, e)
		undirectedOK(t, e)
		r := float64(e.Len()) / float64(s.Entries)
		if r < 0.85 || r > 1.15 {
			t.Errorf("%s (%s): %d entries, the dataset %d (%.2fx)", s.Name, s.Model, e.Len(), s.Entries, r)
		}
		t.Logf("%s (%s): %d vertices, %d entries, the dataset %d (%.2fx)", s.Name, s.Model, e.NumVertices, e.Len(), s.Entries, r)
	}
}

// TestDelaunay: every triangle of the construction (but those at the far
// corners) has an empty circumcircle — checked against every point — and
// the graph is undirected with about 3 edges per point (Euler: 3n - 3 - h).
func TestDelaunay(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 600
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range xs {
		xs[i], ys[i] = rng.Float64(), rng.Float64()
	}
	tr := &triangulation{x: append(slices.Clone(xs), -100, 100, 0.5), y: append(slices.Clone(ys), -100, -100, 200)}
	tr.t = []tri{{v: [3]int32{n, n + 1, n + 2}, nb: [3]int32{-1, -1, -1}}}
	for _, p := range snakeOrder(xs, ys) {
		tr.insert(int32(p))
	}
	real := 0
	for _, tt := range tr.t {
		a, b, c := tt.v[0], tt.v[1], tt.v[2]
		if orient(tr.x[a], tr.y[a], tr.x[b], tr.y[b], tr.x[c], tr.y[c]) <= 0 {
			t.Fatalf("triangle %v is not counter-clockwise", tt.v)
		}
		if a >= n || b >= n || c >= n {
			continue
		}
		real++
		for d := range int32(n) {
			if d != a && d != b && d != c && inCircle(tr.x[a], tr.y[a], tr.x[b], tr.y[b], tr.x[c], tr.y[c], tr.x[d], tr.y[d]) > 1e-12 {
				t.Fatalf("point %d inside the circumcircle of %v", d, tt.v)
			}
		}
	}
	if real < 2*n-2*int(math.Sqrt(n))-10 {
		t.Fatalf("%d triangles among %d points", real, n)
	}
	e := triangulate(xs, ys)
	checkEdges(t, e)
	undirectedOK(t, e)
	if edges := e.Len() / 2; edges < 3*n-3-60 || edges > 3*n-3 {
		t.Fatalf("%d edges among %d points (Euler: at most 3n-3-h)", edges, n)
	}
	big, err := Delaunay(14, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := DegreeStats(big); d.Mean < 5.9 || d.Mean > 6 || d.Min < 2 {
		t.Fatalf("2^14 points: %+v", d)
	}
	again, _ := Delaunay(14, 1)
	if !slices.Equal(again.Src, big.Src) || !slices.Equal(again.Dst, big.Dst) {
		t.Fatal("another run, another graph")
	}
}

// TestWKGRoundTrip: a graph written as .wkg reads back with its entries
// grouped by source (file order within each), weights too; any damaged
// byte, a cut file or trailing bytes is ErrFormat.
func TestWKGRoundTrip(t *testing.T) {
	e, _ := RMAT(9, 4, RMATOptions{Seed: 2})
	e.W = make([]float64, e.Len())
	for i := range e.W {
		e.W[i] = float64(i) * 0.5
	}
	var buf bytes.Buffer
	if err := WriteWKG(&buf, e); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	back, err := ReadWKG(bytes.NewReader(data), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The expected order: by source, stable.
	idx := make([]int, e.Len())
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(e.Src[a]) - int(e.Src[b]) })
	for k, i := range idx {
		if back.Src[k] != e.Src[i] || back.Dst[k] != e.Dst[i] || back.W[k] != e.W[i] {
			t.Fatalf("entry %d: %d>%d:%v, want %d>%d:%v", k, back.Src[k], back.Dst[k], back.W[k], e.Src[i], e.Dst[i], e.W[i])
		}
	}
	if back.NumVertices != e.NumVertices || !back.Directed {
		t.Fatalf("%d vertices, directed %v", back.NumVertices, back.Directed)
	}
	for _, at := range []int{0, 9, 20, 40, len(data) / 2, len(data) - 1} {
		bad := slices.Clone(data)
		bad[at] ^= 0x40
		if _, err := ReadWKG(bytes.NewReader(bad), ReadOptions{}); !errors.Is(err, ErrFormat) {
			t.Errorf("byte %d flipped: %v", at, err)
		}
	}
	if _, err := ReadWKG(bytes.NewReader(data[:len(data)-3]), ReadOptions{}); !errors.Is(err, ErrFormat) {
		t.Errorf("cut: %v", err)
	}
	if _, err := ReadWKG(bytes.NewReader(append(slices.Clone(data), 0)), ReadOptions{}); !errors.Is(err, ErrFormat) {
		t.Errorf("a trailing byte: %v", err)
	}
	// Through ReadFile, unweighted, with options.
	e.W = nil
	p := filepath.Join(t.TempDir(), "g.wkg")
	f, _ := os.Create(p)
	if err := WriteWKG(f, e); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d, err := ReadFile(p, ReadOptions{Dedup: true})
	if err != nil || d.W != nil || d.Duplicates == 0 && d.Len() != e.Len() {
		t.Fatalf("ReadFile: %v, %v", d, err)
	}
}

func FuzzReadWKG(f *testing.F) {
	e, _ := RMAT(4, 2, RMATOptions{Seed: 1})
	var buf bytes.Buffer
	WriteWKG(&buf, e)
	f.Add(buf.Bytes())
	f.Add([]byte("WKGRAPH\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		e, err := ReadWKG(bytes.NewReader(in), ReadOptions{MaxVertices: 1 << 20})
		checkRead(t, e, err)
	})
}

// TestReviewFixes: a cut gzip stream is an error (not a shorter graph); a
// line past the bound is a parse error; SNAP's error line does not depend
// on the chunks; WriteSNAP round-trips vertices without entries and
// direction; sizes that do not fit are refused; a tiny Mesh3D degree does
// not put every point in one cell.
func TestReviewFixes(t *testing.T) {
	var gz bytes.Buffer
	z := gzip.NewWriter(&gz)
	for i := range 200000 {
		fmt.Fprintf(z, "%d %d\n", i, i+1)
	}
	z.Close()
	cut := gz.Bytes()[:gz.Len()/2]
	zr, _ := gzip.NewReader(bytes.NewReader(cut))
	if e, err := ReadSNAP(zr, ReadOptions{}); err == nil {
		t.Fatalf("a cut gzip stream read as %d entries", e.Len())
	}
	long := strings.Repeat("1", maxLineBytes+10)
	var pe *ParseError
	if _, err := ReadSNAP(strings.NewReader("0 1\n"+long), ReadOptions{}); !errors.As(err, &pe) || pe.Line != 2 {
		t.Fatalf("a %d-byte line: %v", len(long), err)
	}
	withChunks(t, func(t *testing.T) {
		var pe *ParseError
		if _, err := ReadSNAP(strings.NewReader("0 1\n0 1 2\nx\n"), ReadOptions{}); !errors.As(err, &pe) || pe.Line != 2 {
			t.Fatalf("mixed columns then a bad line: %v, want line 2", err)
		}
	})
	e := &Edges{NumVertices: 10, Src: []uint32{1}, Dst: []uint32{2}}
	var buf bytes.Buffer
	WriteSNAP(&buf, e)
	back, err := ReadSNAP(&buf, ReadOptions{})
	if err != nil || back.NumVertices != 10 || back.Directed {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := RMAT(24, 1<<40, RMATOptions{}); err == nil {
		t.Error("RMAT of 2^64 entries taken")
	}
	if _, err := RMAT(4, 1, RMATOptions{A: math.NaN(), B: 0.1, C: 0.1}); err == nil {
		t.Error("a NaN probability taken")
	}
	if _, err := Road(1000, math.NaN(), 1); err == nil {
		t.Error("a NaN road degree taken")
	}
	start := time.Now()
	if _, err := Mesh3D(60000, 1e-300, 1); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Mesh3D with a tiny degree took %v", el)
	}
}
