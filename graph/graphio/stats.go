package graphio

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Degrees summarizes a graph's out-degrees (entries per source vertex).
type Degrees struct {
	Vertices, Entries int
	Min, Max          int
	Mean, StdDev      float64
	Isolated          int // vertices without entries
}

// DegreeStats returns e's out-degree summary.
func DegreeStats(e *Edges) Degrees {
	d := Degrees{Vertices: e.NumVertices, Entries: e.Len()}
	if e.NumVertices == 0 {
		return d
	}
	deg := make([]int32, e.NumVertices)
	for _, s := range e.Src {
		deg[s]++
	}
	d.Min, d.Max = math.MaxInt, 0
	var sum, sq float64
	for _, x := range deg {
		v := int(x)
		d.Min, d.Max = min(d.Min, v), max(d.Max, v)
		if v == 0 {
			d.Isolated++
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(e.NumVertices)
	d.Mean = sum / n
	d.StdDev = math.Sqrt(max(0, sq/n-d.Mean*d.Mean))
	return d
}

// WriteSNAP writes e as a SNAP edge list that ReadSNAP reads back the same:
// a comment header saying whether it is directed and how many vertices and
// entries it has (so vertices without entries count), then "src dst" (or
// "src dst weight") per line.
func WriteSNAP(w io.Writer, e *Edges) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	kind := "undirected"
	if e.Directed {
		kind = "directed"
	}
	fmt.Fprintf(bw, "# %s graph written by warpkit graphio\n# Nodes: %d Entries: %d\n", kind, e.NumVertices, e.Len())
	var line []byte
	for i := range e.Src {
		line = strconv.AppendUint(line[:0], uint64(e.Src[i]), 10)
		line = append(line, '\t')
		line = strconv.AppendUint(line, uint64(e.Dst[i]), 10)
		if e.W != nil {
			line = append(line, '\t')
			line = strconv.AppendFloat(line, e.W[i], 'g', -1, 64)
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}
