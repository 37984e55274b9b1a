// shared.cuh: the values graph.cu and the graph package's Go code share.
// The Go constants are generated from this file (shared_gen.go, by
// internal/kernelgen/constgen with -lower: kPrepPlace is prepPlace; a test
// fails while they differ), so each has one number everywhere.
//
// constgen reads the enums below: one entry per line, `kName = value,` with
// value a decimal number or `1u << N`, and an optional trailing comment that
// becomes the Go constant's comment.
#pragma once
#include <stdint.h>

namespace wk {
namespace gr {

// PrepMode is a batch's prep flags (gr_prep): what prep checks and does
// before the slab hash engine runs the batch.
enum PrepMode : uint32_t {
  kPrepUndirected = 1,  // each edge goes both ways (the reverse also inserted or deleted)
  kPrepSelfLoops = 2,   // self-loops are kept
  kPrepCheckIDs = 4,    // vertex IDs are checked against the dictionary (device batches)
  kPrepClaim = 8,       // vertices without a table are given one bucket each (try_claim)
  kPrepPlace = 16,      // a build's first batch is placed in its empty head slabs (place)
};

// Place sizes a placing prep's grid.
enum Place : int {
  kPlaceRound = 4,  // elements a thread of a placing prep takes at a time
};

}  // namespace gr
}  // namespace wk
