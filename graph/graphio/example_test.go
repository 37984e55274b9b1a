package graphio_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/warpkit/warpkit/graph/graphio"
)

// Reading a MatrixMarket file: a symmetric matrix stores one triangle;
// Symmetrize adds the other, Dedup sorts the entries and keeps one of each.
func ExampleReadMatrixMarket() {
	const mtx = `%%MatrixMarket matrix coordinate real symmetric
% a triangle with weights, and a self-loop
3 3 4
2 1 0.5
3 1 1.5
3 2 2.5
3 3 9
`
	e, err := graphio.ReadMatrixMarket(strings.NewReader(mtx), graphio.ReadOptions{Symmetrize: true, DropSelfLoops: true, Dedup: true})
	if err != nil {
		log.Fatal(err)
	}
	var entries []string
	for i := range e.Len() {
		entries = append(entries, fmt.Sprintf("%d-%d:%g", e.Src[i], e.Dst[i], e.W[i]))
	}
	fmt.Println(strings.Join(entries, " "))
	fmt.Printf("%d vertices, %d self-loop dropped\n", e.NumVertices, e.SelfLoops)
	// Output:
	// 0-1:0.5 0-2:1.5 1-0:0.5 1-2:2.5 2-0:1.5 2-1:2.5
	// 3 vertices, 1 self-loop dropped
}

// Bad input is a *ParseError naming its line.
func ExampleParseError() {
	_, err := graphio.ReadSNAP(strings.NewReader("# edges\n0 1\n1 two\n"), graphio.ReadOptions{})
	fmt.Println(err)
	// Output: graphio: snap: line 3: entry "1 two": vertex IDs must be whole numbers in 0..4294967293
}

// A stand-in for one of the thesis's datasets, generated and summarized.
func ExampleStandIns() {
	for _, s := range graphio.StandIns() {
		if s.Name != "luxembourg_osm" {
			continue
		}
		e, err := s.Generate(1)
		if err != nil {
			log.Fatal(err)
		}
		d := graphio.DegreeStats(e)
		fmt.Printf("%s (%s): %d vertices, %d entries (the dataset: %d), max degree %d\n", s.Name, s.Model, d.Vertices, d.Entries, s.Entries, d.Max)
	}
	// Output: luxembourg_osm (road): 114000 vertices, 238766 entries (the dataset: 239000), max degree 4
}
