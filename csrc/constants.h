// Constants' records read once a process. A constant (a weight or buffer the
// program was given, which no kernel of the run wrote yet: a record whose
// `why` is AOTI_DEBUG_PRINTER_WHY_CONSTANT) mostly holds the same values
// from one run to the next, so its first record's contents serve its later
// records, in every run and thread, while it is unchanged.
//
// Unchanged means, without reading it (a read is the pass this saves):
// the same storage, still alive, at the same address, viewed the same way,
// at the same version (a tensor that tracks one: an in-place change by torch
// ops, a user-managed constant updated in place); AOTInductor's own constant
// updates (update_constant_buffer, swap_constant_buffer) make new storage.
// A kernel that writes a constant says so in its records after launch
// (written), and a kernel that may write memory no record names, or has no
// records, forgets them all (shim.cpp). What no such sign shows (a write
// through a raw pointer outside torch, to an inference-mode tensor) is not
// seen: the write guard's records read every time.
#pragma once

#include "record.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>

namespace aoti_debug_printer::constants {

struct Entry;

// Whether a record is of a constant: what the code generator said of it.
bool is_constant(const Where& where);
// What the first record of `t` read, while `t` is unchanged.
std::optional<Contents> find(const at::Tensor& t);
// A record of the constant `t` reads it now or later: what it reads is
// remembered (remember), unless a write to `t` comes first. nullptr where
// `t` cannot be told unchanged (no storage, not strided).
std::shared_ptr<Entry> to_remember(const at::Tensor& t);
// What that record read (its values, if any, are copied).
void remember(const std::shared_ptr<Entry>& entry, const Contents& contents);
// A kernel wrote `t`: a constant whose memory it overlaps is read again.
void written(const at::Tensor& t);
// Anything may have been written: every constant is read again.
void forget_all();

}  // namespace aoti_debug_printer::constants
