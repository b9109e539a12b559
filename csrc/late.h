// Records whose text is made where they are written (output.h's LateRecord:
// by the writer thread, in its turn among the thread's records that wait),
// once what they wait for has landed. Apart from record.h, which holds what
// a record is and reads it: these format it, and format.h knows records.
#pragma once

#include "constants.h"
#include "device.h"
#include "output.h"
#include "record.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace aoti_debug_printer {

// The whole printed record of a CUDA tensor, its contents read on the GPU
// without waiting (device::snapshot_later). Empty while the thread's ring has
// no room; the caller then writes out the records ahead (which frees it) and
// asks again. `where` is moved from only when a record is returned. Only for
// tensors can_record_later takes. `batched`: as device::snapshot_later's.
// `constant`: where what it reads is remembered (constants::to_remember).
std::unique_ptr<LateRecord> record_later(Where&& where, const at::Tensor& t, int64_t max_values,
                                         bool json, bool batched, ReadsWhileUnchanged& reads,
                                         std::shared_ptr<constants::Entry> constant = nullptr);

// The whole printed record of a tensor that can_record_stored takes, written once `run`'s slots
// have landed; `field`: the slot's first field in the workspace.
std::unique_ptr<LateRecord> record_stored_later(Where&& where, const at::Tensor& t,
                                                std::shared_ptr<device::StoredRun> run,
                                                int64_t field, bool json);

// A record whose contents are known, formatted where it is written (by the
// writer thread, in its turn among the thread's records that wait).
std::unique_ptr<LateRecord> formatted_later(TensorRecord r, bool json);

}  // namespace aoti_debug_printer
