package graphio

// StandIn is a synthetic graph standing in for one of the datasets of
// Awad's thesis (Table 5.1), which cannot be downloaded here: its model,
// and the real graph's vertex and entry counts to compare with. Generate
// makes it, undirected with both directions of every edge, without
// self-loops or repeated entries.
type StandIn struct {
	Name              string // the dataset's name
	Model             string // how Generate makes it
	Vertices, Entries int    // the real graph's (Table 5.1: entries count both directions)
	Generate          func(seed uint64) (*Edges, error)
}

// StandIns returns the stand-ins of the thesis's datasets (the spec's §5):
// road networks by Road at their vertex count and mean degree, the
// DIMACS10 random geometric graphs by their own model, the social and
// collaboration graphs by RMAT at the spec's scales and edge factors, the
// Delaunay triangulations by their own model, and ldoor by Mesh3D.
func StandIns() []StandIn {
	undirected := ReadOptions{Symmetrize: true, DropSelfLoops: true, Dedup: true}
	road := func(n, entries int) func(uint64) (*Edges, error) {
		return func(seed uint64) (*Edges, error) { // Road lists each edge both ways, once
			return Road(n, float64(entries)/float64(n), seed)
		}
	}
	rmat := func(scale, ef int) func(uint64) (*Edges, error) {
		return func(seed uint64) (*Edges, error) {
			e, err := RMAT(scale, ef, RMATOptions{Seed: seed})
			if err != nil {
				return nil, err
			}
			if e, err = undirected.Apply(e); err != nil {
				return nil, err
			}
			e.Directed = false
			return e, nil
		}
	}
	rgg := func(k int) func(uint64) (*Edges, error) {
		return func(seed uint64) (*Edges, error) { return RGG(k, seed) }
	}
	// Sizes as Table 5.1 rounds them.
	return []StandIn{
		{"luxembourg_osm", "road", 114_000, 239_000, road(114_000, 239_000)},
		{"germany_osm", "road", 11_500_000, 24_700_000, road(11_500_000, 24_700_000)},
		{"road_usa", "road", 23_900_000, 57_700_000, road(23_900_000, 57_700_000)},
		{"delaunay_n20", "delaunay k=20", 1_000_000, 6_300_000, func(seed uint64) (*Edges, error) { return Delaunay(20, seed) }},
		{"delaunay_n23", "delaunay k=23", 8_400_000, 50_300_000, func(seed uint64) (*Edges, error) { return Delaunay(23, seed) }},
		{"rgg_n_2_20_s0", "rgg k=20", 1_000_000, 13_800_000, rgg(20)},
		{"rgg_n_2_24_s0", "rgg k=24", 16_800_000, 265_100_000, rgg(24)},
		{"coAuthorsDBLP", "rmat s18 ef4", 299_000, 1_900_000, rmat(18, 4)},
		{"ldoor", "mesh3d avg 48", 952_000, 45_500_000, func(seed uint64) (*Edges, error) { return Mesh3D(952_000, 48, seed) }},
		{"soc-LiveJournal1", "rmat s22 ef12", 4_800_000, 85_700_000, rmat(22, 12)},
		{"soc-orkut", "rmat s22 ef28", 3_000_000, 212_700_000, rmat(22, 28)},
		{"hollywood-2009", "rmat s20 ef64", 1_100_000, 112_800_000, rmat(20, 64)},
	}
}
