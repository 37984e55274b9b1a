package graphio

import (
	"fmt"
	"slices"
)

// Delaunay generates the Delaunay triangulation of 2^k random points in the
// unit square, as DIMACS10's delaunay_nX graphs are made: an edge between
// every two points whose Voronoi cells touch, about 3 per point (6 entries).
// Undirected, both directions listed, vertex i the i-th point generated;
// the result depends on the seed alone.
//
// The triangulation is built by hand (no Go module for it is reachable
// here): points inserted one by one in the order of a snake through a
// grid of cells (so that each is found by a short walk from the last),
// each splitting its triangle in three, then edges flipped until every
// triangle's circumcircle is empty (Lawson). It starts from a triangle
// around the square with corners far off; triangles touching those corners
// are dropped at the end, which can miss a few edges of the convex hull.
func Delaunay(k int, seed uint64) (*Edges, error) {
	if k < 2 || k > 26 {
		return nil, fmt.Errorf("graphio: Delaunay of 2^%d points: want k in 2..26", k)
	}
	pts := unitPoints(1<<k, 2, seed, 0x64656c61756e6179)
	xs, ys := pts[0], pts[1]
	return triangulate(xs, ys), nil
}

// tri is a triangle: its vertices counter-clockwise, and for each vertex
// the triangle across the edge opposite it (-1: none).
type tri struct {
	v, nb [3]int32
}

// triangulation is the state of the incremental construction.
type triangulation struct {
	x, y []float64 // the points, then the three far corners
	t    []tri
	last int32   // where the next point's walk starts
	todo []int32 // triangle*3+edge: edges to check
}

func orient(ax, ay, bx, by, cx, cy float64) float64 {
	return (bx-ax)*(cy-ay) - (by-ay)*(cx-ax)
}

// inCircle is positive when d lies inside the circumcircle of the
// counter-clockwise triangle abc.
func inCircle(ax, ay, bx, by, cx, cy, dx, dy float64) float64 {
	adx, ady := ax-dx, ay-dy
	bdx, bdy := bx-dx, by-dy
	cdx, cdy := cx-dx, cy-dy
	ad, bd, cd := adx*adx+ady*ady, bdx*bdx+bdy*bdy, cdx*cdx+cdy*cdy
	return adx*(bdy*cd-bd*cdy) - ady*(bdx*cd-bd*cdx) + ad*(bdx*cdy-bdy*cdx)
}

// triangulate returns the Delaunay edges of the points, both directions,
// in order of source vertex.
func triangulate(xs, ys []float64) *Edges {
	n := len(xs)
	tr := &triangulation{x: append(slices.Clone(xs), -100, 100, 0.5), y: append(slices.Clone(ys), -100, -100, 200)}
	tr.t = make([]tri, 1, 2*n+8)
	tr.t[0] = tri{v: [3]int32{int32(n), int32(n + 1), int32(n + 2)}, nb: [3]int32{-1, -1, -1}}
	for _, p := range snakeOrder(xs, ys) {
		tr.insert(int32(p))
	}
	// The edges of the triangles that do not touch the far corners.
	adj := make([][]uint32, n)
	for _, t := range tr.t {
		if t.v[0] >= int32(n) || t.v[1] >= int32(n) || t.v[2] >= int32(n) {
			continue
		}
		for i := range 3 {
			a, b := t.v[i], t.v[(i+1)%3]
			adj[a] = append(adj[a], uint32(b)) // each edge twice, once per direction, across its two triangles
			adj[b] = append(adj[b], uint32(a))
		}
	}
	e := &Edges{NumVertices: n}
	for v := range adj {
		slices.Sort(adj[v])
		adj[v] = slices.Compact(adj[v])
		for _, u := range adj[v] {
			e.Src, e.Dst = append(e.Src, uint32(v)), append(e.Dst, u)
		}
	}
	return e
}

// snakeOrder returns the points' indices in the order of a snake through a
// grid of about one point per cell: consecutive points are close.
func snakeOrder(xs, ys []float64) []uint32 {
	g := 1
	for g*g < len(xs) {
		g++
	}
	_, order := byCell(len(xs), g*g, func(i int) int {
		cx, cy := min(g-1, int(xs[i]*float64(g))), min(g-1, int(ys[i]*float64(g)))
		if cy%2 == 1 {
			cx = g - 1 - cx
		}
		return cy*g + cx
	})
	return order
}

// locate walks from the last triangle to the one holding point p.
func (tr *triangulation) locate(p int32) int32 {
	px, py := tr.x[p], tr.y[p]
	t := tr.last
	for steps := 0; ; steps++ {
		moved := false
		v := &tr.t[t].v
		for i := range 3 {
			a, b := v[(i+1)%3], v[(i+2)%3]
			if orient(tr.x[a], tr.y[a], tr.x[b], tr.y[b], px, py) < 0 {
				if nb := tr.t[t].nb[i]; nb >= 0 {
					t, moved = nb, true
					break
				}
			}
		}
		if !moved || steps > 4*len(tr.t)+16 {
			return t
		}
	}
}

// insert adds point p: its triangle split in three, then edges flipped
// until the triangulation is Delaunay again.
func (tr *triangulation) insert(p int32) {
	t0 := tr.locate(p)
	old := tr.t[t0]
	a, b, c := old.v[0], old.v[1], old.v[2]
	t1, t2 := int32(len(tr.t)), int32(len(tr.t)+1)
	// t0 = (p, b, c) keeps the neighbour across bc; t1 = (a, p, c) across
	// ca; t2 = (a, b, p) across ab.
	tr.t[t0] = tri{v: [3]int32{p, b, c}, nb: [3]int32{old.nb[0], t1, t2}}
	tr.t = append(tr.t,
		tri{v: [3]int32{a, p, c}, nb: [3]int32{t0, old.nb[1], t2}},
		tri{v: [3]int32{a, b, p}, nb: [3]int32{t0, t1, old.nb[2]}})
	tr.relink(old.nb[1], t0, t1)
	tr.relink(old.nb[2], t0, t2)
	tr.last = t0
	tr.todo = append(tr.todo, t0*3+0, t1*3+1, t2*3+2)
	for len(tr.todo) > 0 {
		e := tr.todo[len(tr.todo)-1]
		tr.todo = tr.todo[:len(tr.todo)-1]
		tr.legalize(e/3, int(e%3))
	}
}

// relink makes triangle u, which had from as a neighbour, point to to
// instead (u -1: none).
func (tr *triangulation) relink(u, from, to int32) {
	if u < 0 {
		return
	}
	for i := range 3 {
		if tr.t[u].nb[i] == from {
			tr.t[u].nb[i] = to
			return
		}
	}
}

// legalize flips the edge of triangle t opposite its vertex i if the
// triangle across it has its far vertex inside t's circumcircle.
func (tr *triangulation) legalize(t int32, i int) {
	u := tr.t[t].nb[i]
	if u < 0 {
		return
	}
	tv := tr.t[t].v
	p, a, b := tv[i], tv[(i+1)%3], tv[(i+2)%3] // the edge is ab
	// u's vertex across the edge: the one that is neither a nor b.
	j := 0
	for k := range 3 {
		if tr.t[u].v[k] != a && tr.t[u].v[k] != b {
			j = k
		}
	}
	q := tr.t[u].v[j]
	if inCircle(tr.x[p], tr.y[p], tr.x[a], tr.y[a], tr.x[b], tr.y[b], tr.x[q], tr.y[q]) <= 0 {
		return
	}
	// Flip ab to pq: t = (p, a, q), u = (p, q, b).
	tAcrossPA := tr.t[t].nb[(i+2)%3] // across edge p-a (opposite b)
	tAcrossBP := tr.t[t].nb[(i+1)%3] // across edge b-p (opposite a)
	var uAcrossAQ, uAcrossQB int32   // u's neighbours across a-q and q-b
	for k := range 3 {
		switch tr.t[u].v[k] {
		case b: // opposite b: edge a-q
			uAcrossAQ = tr.t[u].nb[k]
		case a: // opposite a: edge q-b
			uAcrossQB = tr.t[u].nb[k]
		}
	}
	tr.t[t] = tri{v: [3]int32{p, a, q}, nb: [3]int32{uAcrossAQ, u, tAcrossPA}}
	tr.t[u] = tri{v: [3]int32{p, q, b}, nb: [3]int32{uAcrossQB, tAcrossBP, t}}
	tr.relink(uAcrossAQ, u, t)
	tr.relink(tAcrossBP, t, u)
	tr.todo = append(tr.todo, t*3+0, u*3+0)
}
