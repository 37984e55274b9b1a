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
	if scale < 1 || scale > 31 || edgeFactor < 1 || uint64(edgeFactor)<<scale > 1<<36 {
		return nil, fmt.Errorf("graphio: RMAT scale %d, edge factor %d: want scale 1..31 and at most 2^36 entries", scale, edgeFactor)
	}
	if o.A == 0 && o.B == 0 && o.C == 0 {
		o.A, o.B, o.C = 0.57, 0.19, 0.19
	}
	if o.A < 0 || o.B < 0 || o.C < 0 || o.A+o.B+o.C > 1 {
		return nil, fmt.Errorf("graphio: RMAT probabilities %v, %v, %v: want non-negative, summing to at most 1", o.A, o.B, o.C)
	}
	n := 1 << scale
	m := edgeFactor << scale
	e := &Edges{NumVertices: n, Directed: true, Src: make([]uint32, m), Dst: make([]uint32, m)}
	perm := newFeistel(scale, o.Seed)
	ab, abc := o.A+o.B, o.A+o.B+o.C
	chunks := (m + genChunk - 1) / genChunk
	hostpar.ForCores(chunks, 1, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			rng := rand.New(rand.NewPCG(o.Seed, uint64(c)))
			for i := c * genChunk; i < min(m, (c+1)*genChunk); i++ {
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
			}
		}
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
// (rgg_n_2_20 has 13.8M entries). Vertex i is the i-th point generated; the
// result depends on the seed alone.
func RGG(k int, seed uint64) (*Edges, error) {
	if k < 1 || k > 28 {
		return nil, fmt.Errorf("graphio: RGG 2^%d points: want k in 1..28", k)
	}
	n := 1 << k
	radius := 0.55 * math.Sqrt(math.Log(float64(n))/float64(n))
	xs, ys := rggPoints(k, seed)
	return geometric(xs, ys, radius), nil
}

// rggPoints places RGG's 2^k points, from the seed alone.
func rggPoints(k int, seed uint64) (xs, ys []float64) {
	n := 1 << k
	xs, ys = make([]float64, n), make([]float64, n)
	hostpar.ForCores((n+genChunk-1)/genChunk, 1, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for i := c * genChunk; i < min(n, (c+1)*genChunk); i++ {
				xs[i], ys[i] = rng.Float64(), rng.Float64()
			}
		}
	})
	return xs, ys
}

// geometric returns the graph of points (xs[i], ys[i]) in the unit square
// joined when closer than radius, both directions, found through a grid of
// cells at least radius wide (a point's neighbours lie in its cell and the
// eight around it). Entries come in order of source vertex.
func geometric(xs, ys []float64, radius float64) *Edges {
	n := len(xs)
	g := max(1, int(1/radius)) // cells per side
	cellOf := func(i int) int {
		cx, cy := min(g-1, int(xs[i]*float64(g))), min(g-1, int(ys[i]*float64(g)))
		return cy*g + cx
	}
	// Points by cell (a counting sort).
	start := make([]int, g*g+1)
	for i := range n {
		start[cellOf(i)+1]++
	}
	for c := range g * g {
		start[c+1] += start[c]
	}
	byCell := make([]uint32, n)
	fill := append([]int(nil), start[:g*g]...)
	for i := range n {
		c := cellOf(i)
		byCell[fill[c]] = uint32(i)
		fill[c]++
	}
	r2 := radius * radius
	// Each part lists the neighbours of its vertices, in vertex order.
	type part struct{ src, dst []uint32 }
	parts := make([]part, hostpar.Parts(n, 1<<12)*4)
	hostpar.ForCores(len(parts), 1, func(_, lo, hi int) {
		for p := lo; p < hi; p++ {
			var out part
			for i := p * n / len(parts); i < (p+1)*n/len(parts); i++ {
				c := cellOf(i)
				cx, cy := c%g, c/g
				for dy := -1; dy <= 1; dy++ {
					for dx := -1; dx <= 1; dx++ {
						x, y := cx+dx, cy+dy
						if x < 0 || y < 0 || x >= g || y >= g {
							continue
						}
						cc := y*g + x
						for _, j := range byCell[start[cc]:start[cc+1]] {
							if int(j) == i {
								continue
							}
							if ddx, ddy := xs[i]-xs[j], ys[i]-ys[j]; ddx*ddx+ddy*ddy < r2 {
								out.src, out.dst = append(out.src, uint32(i)), append(out.dst, j)
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
