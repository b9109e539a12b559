// Pinned and scratch memory, kept per host thread: no allocator call on the
// per-tensor path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_debug_printer::device::detail {

// Mapped pinned host memory of at least `bytes`, this thread's: what a
// synchronous snapshot's kernels write into. Grows to the largest asked for.
uint8_t* host_result_buffer(size_t bytes);

// Device memory for a non-contiguous tensor's values, made contiguous before
// they are copied back; this thread's, for `device`.
struct ScratchBuffer {
  void* data = nullptr;
  int64_t size = 0;
};
ScratchBuffer& scratch_of(int device);
uint8_t* device_scratch(int device, int64_t bytes);

// A device word holding 1, per device: copied behind a copy to the host, in
// stream order, it is the ticket that says the copy has landed.
const int64_t* device_one(int device);

}  // namespace aoti_debug_printer::device::detail
