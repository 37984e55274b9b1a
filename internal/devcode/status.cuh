// status.cuh: the one registry of the values device code and Go share about
// failures: the status flags kernels report and the words of a launch's
// control block. The Go constants are generated from this file
// (internal/gpurt/status_gen.go, by internal/kernelgen/constgen; a test fails
// while they differ), so a flag has one number everywhere.
//
// A kernel takes a `uint32_t* status` (zeroed by the host before launch) and
// ORs flags into it; the host reads it after synchronizing and maps each flag
// to an error value (gpurt.StatusError).
//
// constgen reads the enums below: one entry per line, `kName = value,` with
// value a decimal number or `1u << N`, and an optional trailing comment that
// becomes the Go constant's comment.
#pragma once
#include <stdint.h>

namespace wk {

enum StatusFlag : uint32_t {
  kStatusOK = 0,
  kStatusRetryLimit = 1u << 0,        // a bounded retry/spin loop gave up
  kStatusPoolExhausted = 1u << 1,     // an allocator had no free unit left
  kStatusOverflow = 1u << 2,          // an output buffer was too small
  kStatusBadFree = 1u << 8,           // slaballoc: a free of an address that is not an allocated unit
  kStatusReservedKey = 1u << 9,       // slabhash: a key of the batch is a sentinel
  kStatusBadOp = 1u << 10,            // slabhash: an unknown operation code
  kStatusBadRoom = 1u << 11,          // slabhash find-all: a key's room is outside the output
  kStatusInvalidArgument = 1u << 12,  // btree: a device batch held an invalid operation
  kStatusNoTable = 1u << 13,          // graph: an insert's source vertex has no table yet (the host makes one and reruns)
};

// Ctrl numbers the u64 words of a slab hash launch's control block: status
// flags, the change in live entries, the failed elements, the reserved keys or
// bad op codes a scan found, the snapshot counter, the inserted elements, the
// blocks that finished, and the pool's allocated units as the last block saw
// them.
enum Ctrl : int {
  kCtrlStatus = 0,
  kCtrlDelta = 1,
  kCtrlFailed = 2,
  kCtrlRejected = 3,
  kCtrlCount = 4,
  kCtrlInserted = 5,
  kCtrlDone = 6,   // blocks of an apply launch that finished
  kCtrlUsed = 7,   // the pool's allocated units, written by the last block of an apply launch
  kCtrlTables = 8,  // graph: tables an insert batch's prep gave to vertices without one
  kCtrlWords = 9,  // words in the block
};

__device__ __forceinline__ void report(uint32_t* status, uint32_t flag) {
  if (status) atomicOr(status, flag);
}

}  // namespace wk
