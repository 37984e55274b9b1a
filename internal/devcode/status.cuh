// status.cuh: the device-side status word through which kernels report
// failures that must become host errors instead of hangs or faults.
//
// A kernel takes a `uint32_t* status` (zeroed by the host before launch) and
// ORs flags into it; the host reads it after synchronizing and maps each flag to
// an error value (ErrRetryLimit, ErrPoolExhausted, ...). The codes are mirrored
// in Go by each package that reads them.
#pragma once
#include <stdint.h>

namespace wk {

enum StatusFlag : uint32_t {
  kStatusOK = 0,
  kStatusRetryLimit = 1u << 0,    // a bounded retry/spin loop gave up
  kStatusPoolExhausted = 1u << 1,  // an allocator had no free unit left
  kStatusOverflow = 1u << 2,       // an output buffer was too small
};

__device__ __forceinline__ void report(uint32_t* status, uint32_t flag) {
  if (status) atomicOr(status, flag);
}

}  // namespace wk
