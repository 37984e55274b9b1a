package graphio

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/warpkit/warpkit/internal/hostpar"
)

// genChunk is how many entries (or points) one seeded stream generates: the
// output depends on the seed alone, not on how many goroutines run.
const genChunk = 1 << 16

// seededChunks calls fn for every index of [0, n) on goroutines, each run
// of genChunk indices drawing from a random stream of its own (stream
// chunk^salt of seed): the values depend on the seed alone, not on
// GOMAXPROCS.
func seededChunks(n int, seed, salt uint64, fn func(rng *rand.Rand, i int)) {
	hostpar.ForCores((n+genChunk-1)/genChunk, 1, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			rng := rand.New(rand.NewPCG(seed, uint64(c)^salt))
			for i := c * genChunk; i < min(n, (c+1)*genChunk); i++ {
				fn(rng, i)
			}
		}
	})
}

// unitPoints places n points uniformly in the unit square (dims 2) or
// cube (dims 3): coordinate d of point i is pts[d][i].
func unitPoints(n, dims int, seed, salt uint64) [][]float64 {
	pts := make([][]float64, dims)
	for d := range pts {
		pts[d] = make([]float64, n)
	}
	seededChunks(n, seed, salt, func(rng *rand.Rand, i int) {
		for d := range pts {
			pts[d][i] = rng.Float64()
		}
	})
	return pts
}

// byCell sorts the indices of n points by the cell cellOf gives each (a
// counting sort over cells cells): cell c's points are order[start[c]:
// start[c+1]], in index order.
func byCell(n, cells int, cellOf func(i int) int) (start []int, order []uint32) {
	start = make([]int, cells+1)
	for i := range n {
		start[cellOf(i)+1]++
	}
	for c := range cells {
		start[c+1] += start[c]
	}
	order = make([]uint32, n)
	fill := append([]int(nil), start[:cells]...)
	for i := range n {
		c := cellOf(i)
		order[fill[c]] = uint32(i)
		fill[c]++
	}
	return start, order
}

// RMATOptions configure RMAT. Zero A, B and C take Graph500's 0.57, 0.19,
// 0.19 (D = 1 - A - B - C).
type RMATOptions struct {
	A, B, C float64
	Seed    uint64
}

// RMAT generates a Kronecker (R-MAT) graph as Graph500 does: 2^scale
// vertices, edgeFactor·2^scale directed entries, each placed by scale
// recursive choices of a quadrant of the adjacency matrix with
// probabilities A, B, C, D, then vertex IDs permuted by a bijection keyed
// by the seed (so that high degrees are not bunched at low IDs).
// Duplicates and self-loops are kept, as Graph500 generates them: read
// options do not apply; Dedup them where a structure wants them gone. The
// result depends on the options alone (not on GOMAXPROCS).
func RMAT(scale, edgeFactor int, o RMATOptions) (*Edges, error) {
	if scale < 1 || scale > 31 || edgeFactor < 1 || edgeFactor > (1<<36)>>scale {
		return nil, fmt.Errorf("graphio: RMAT scale %d, edge factor %d: want scale 1..31 and at most 2^36 entries", scale, edgeFactor)
	}
	if o.A == 0 && o.B == 0 && o.C == 0 {
		o.A, o.B, o.C = 0.57, 0.19, 0.19
	}
	if !(o.A >= 0 && o.B >= 0 && o.C >= 0 && o.A+o.B+o.C <= 1) { // (NaN fails too)
		return nil, fmt.Errorf("graphio: RMAT probabilities %v, %v, %v: want non-negative, summing to at most 1", o.A, o.B, o.C)
	}
	n := 1 << scale
	m := edgeFactor << scale
	e := &Edges{NumVertices: n, Directed: true, Src: make([]uint32, m), Dst: make([]uint32, m)}
	perm := newFeistel(scale, o.Seed)
	ab, abc := o.A+o.B, o.A+o.B+o.C
	seededChunks(m, o.Seed, 0, func(rng *rand.Rand, i int) {
		var s, d uint32
		for bit := range scale {
			switch p := rng.Float64(); {
			case p < o.A:
			case p < ab:
				d |= 1 << bit
			case p < abc:
				s |= 1 << bit
			default:
				s |= 1 << bit
				d |= 1 << bit
			}
		}
		e.Src[i], e.Dst[i] = perm.apply(s), perm.apply(d)
	})
	return e, nil
}

// feistel is a keyed bijection of [0, 2^bits): a 4-round Feistel network
// on 2·half bits, walked until the value falls back in range (cycle
// walking keeps it a bijection of the smaller range).
type feistel struct {
	bits, half int
	keys       [4]uint64
}

func newFeistel(bits int, seed uint64) feistel {
	f := feistel{bits: bits, half: (bits + 1) / 2}
	rng := rand.New(rand.NewPCG(seed, 0x6665697374656c))
	for i := range f.keys {
		f.keys[i] = rng.Uint64()
	}
	return f
}

func (f feistel) apply(x uint32) uint32 {
	mask := uint64(1)<<f.half - 1
	v := uint64(x)
	for {
		l, r := v>>f.half, v&mask
		for _, k := range f.keys {
			l, r = r, l^(mix64(r^k)&mask)
		}
		v = l<<f.half | r
		if v < 1<<f.bits {
			return uint32(v)
		}
	}
}

// mix64 is SplitMix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// RGG generates a random geometric graph in DIMACS10's rgg_n_2_k model: 2^k
// points placed uniformly in the unit square, and an edge between every two
// closer than 0.55·√(ln n / n). Undirected, both directions listed (as
// ReadMETIS lists the DIMACS10 files): about 0.95·ln n entries per vertex
// (Table 5.1 gives rgg_n_2_20 13.8M entries). Vertex i is the i-th point
// generated; the result depends on the seed alone.
func RGG(k int, seed uint64) (*Edges, error) {
	if k < 1 || k > 28 {
		return nil, fmt.Errorf("graphio: RGG 2^%d points: want k in 1..28", k)
	}
	n := 1 << k
	radius := 0.55 * math.Sqrt(math.Log(float64(n))/float64(n))
	xs, ys := rggPoints(k, seed)
	return geometric(xs, ys, nil, radius), nil
}

// rggPoints places RGG's 2^k points, from the seed alone.
func rggPoints(k int, seed uint64) (xs, ys []float64) {
	pts := unitPoints(1<<k, 2, seed, 0)
	return pts[0], pts[1]
}

// Mesh3D generates a 3-D random geometric graph, the stand-in for finite-
// element meshes such as ldoor: n points uniform in the unit cube, joined
// when closer than the radius at which a point away from the faces has
// avgDegree neighbours on average ((4/3)·π·r³·n = avgDegree); points near
// the faces have fewer. Undirected, both directions listed; the result
// depends on the seed alone.
func Mesh3D(n int, avgDegree float64, seed uint64) (*Edges, error) {
	if n < 2 || n > 1<<28 || !(avgDegree > 0 && avgDegree <= 1024) {
		return nil, fmt.Errorf("graphio: Mesh3D of %d points, degree %v: want 2..2^28 points and a degree in (0, 1024]", n, avgDegree)
	}
	pts := mesh3DPoints(n, seed)
	return geometric(pts[0], pts[1], pts[2], mesh3DRadius(n, avgDegree)), nil
}

func mesh3DRadius(n int, avgDegree float64) float64 {
	return min(1, math.Cbrt(3*avgDegree/(4*math.Pi*float64(n))))
}

// mesh3DPoints places Mesh3D's points, from the seed alone.
func mesh3DPoints(n int, seed uint64) [][]float64 { return unitPoints(n, 3, seed, 0) }

// geometric returns the graph of points (xs[i], ys[i], zs[i]) in the unit
// square (zs nil) or cube joined when closer than radius, both directions,
// found through a grid of cells at least radius wide (a point's neighbours
// lie in its cell and the ones around it). Entries come in order of source
// vertex.
func geometric(xs, ys, zs []float64, radius float64) *Edges {
	n := len(xs)
	// Cells per side, clamped in floating point (1/radius may not fit an
	// int) to about a point per cell: wider cells stay correct, and more
	// cells than points would only cost memory.
	limit := math.Ceil(math.Sqrt(float64(n)))
	if zs != nil {
		limit = math.Ceil(math.Cbrt(float64(n)))
	}
	g := max(1, int(math.Min(1/radius, limit)))
	gz := 1
	if zs != nil {
		gz = g
	}
	cellAt := func(v float64) int { return min(g-1, int(v*float64(g))) }
	cellOf := func(i int) int {
		c := cellAt(ys[i])*g + cellAt(xs[i])
		if zs != nil {
			c += cellAt(zs[i]) * g * g
		}
		return c
	}
	start, inCell := byCell(n, g*g*gz, cellOf)
	r2 := radius * radius
	dzs := []int{0}
	if zs != nil {
		dzs = []int{-1, 0, 1}
	}
	// Each part lists the neighbours of its vertices, in vertex order.
	type part struct{ src, dst []uint32 }
	parts := make([]part, hostpar.Parts(n, 1<<12)*4)
	hostpar.ForCores(len(parts), 1, func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			var out part
			for i := p * n / len(parts); i < (p+1)*n/len(parts); i++ {
				cx, cy, cz := cellAt(xs[i]), cellAt(ys[i]), 0
				if zs != nil {
					cz = cellAt(zs[i])
				}
				for _, dz := range dzs {
					for dy := -1; dy <= 1; dy++ {
						for dx := -1; dx <= 1; dx++ {
							x, y, z := cx+dx, cy+dy, cz+dz
							if x < 0 || y < 0 || z < 0 || x >= g || y >= g || z >= gz {
								continue
							}
							cc := (z*g+y)*g + x
							for _, j := range inCell[start[cc]:start[cc+1]] {
								if int(j) == i {
									continue
								}
								d := (xs[i]-xs[j])*(xs[i]-xs[j]) + (ys[i]-ys[j])*(ys[i]-ys[j])
								if zs != nil {
									d += (zs[i] - zs[j]) * (zs[i] - zs[j])
								}
								if d < r2 {
									out.src, out.dst = append(out.src, uint32(i)), append(out.dst, j)
								}
							}
						}
					}
				}
			}
			parts[p] = out
		}
	})
	e := &Edges{NumVertices: n}
	total := 0
	for _, p := range parts {
		total += len(p.src)
	}
	e.Src, e.Dst = make([]uint32, 0, total), make([]uint32, 0, total)
	for _, p := range parts {
		e.Src, e.Dst = append(e.Src, p.src...), append(e.Dst, p.dst...)
	}
	return e
}

// Road generates a road-network-like graph of n vertices and about
// avgDegree entries per vertex (2 < avgDegree < 2.8; road networks have
// 2.1-2.4): a square grid of intersections with 30% of its street segments
// removed at random, each remaining segment subdivided by degree-2 vertices
// (the bends of a road) until there are n vertices. Undirected, both
// directions listed; the result depends on the seed alone. (Real road
// networks have intersections of degree up to 6-13; this model's are at
// most 4.)
func Road(n int, avgDegree float64, seed uint64) (*Edges, error) {
	const keep = 0.7
	if n < 16 || n > 1<<30 || !(avgDegree > 2 && avgDegree < 2+2*keep-0.01) {
		return nil, fmt.Errorf("graphio: Road of %d vertices, degree %v: want 16..2^30 vertices and a degree in (2, %.2f)", n, avgDegree, 2+2*keep-0.01)
	}
	// With I intersections and about 2·keep·I segments, the n - I bend
	// vertices make 2·keep·I + n - I edges: a mean degree of
	// 2 + 2(2·keep - 1)·I/n.
	g := max(2, int(math.Round(math.Sqrt((avgDegree-2)/(2*(2*keep-1))*float64(n)))))
	inter := g * g
	if inter > n {
		return nil, fmt.Errorf("graphio: Road: %d vertices are too few for degree %v", n, avgDegree)
	}
	rng := rand.New(rand.NewPCG(seed, 0x726f6164))
	var segs [][2]uint32
	for y := range g {
		for x := range g {
			v := uint32(y*g + x)
			if x+1 < g && rng.Float64() < keep {
				segs = append(segs, [2]uint32{v, v + 1})
			}
			if y+1 < g && rng.Float64() < keep {
				segs = append(segs, [2]uint32{v, v + uint32(g)})
			}
		}
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("graphio: Road: no segment kept (seed %d)", seed)
	}
	bends := n - inter
	e := &Edges{NumVertices: n}
	next := uint32(inter)
	link := func(a, b uint32) {
		e.Src, e.Dst = append(e.Src, a, b), append(e.Dst, b, a)
	}
	for k, s := range segs {
		m := bends / len(segs)
		if k < bends%len(segs) {
			m++
		}
		prev := s[0]
		for range m {
			link(prev, next)
			prev = next
			next++
		}
		link(prev, s[1])
	}
	return e, nil
}
