// Level 1 off the model's thread. A snapshot's elements are copied into
// host memory the saver owns (pinned for a CUDA tensor, the copy queued on
// the tensor's stream), and the saver's one thread takes its statistics,
// writes its file and its manifest line (save.h), in the order they were
// taken. The model's thread waits for the disk only where that memory
// (Settings::save_memory) is full, and the snapshot's manifest line
// says how long it waited (save_waited_ms).
//
// What is queued is written by the time a finding is noted, a reader in
// this process loads the dump (wait_for_saves), or the process exits; a
// process killed meanwhile loses what was still queued, never a file
// already listed (save.h's files are whole or absent).
#pragma once

#include "record.h"

#include <ATen/core/Tensor.h>

#include <string>

namespace aoti_debug_printer::saver {

// Saves `t`'s snapshot under `dir`, listed with `record` (describe()'s,
// its statistics not taken yet: they are taken from the copy). Where `t`
// cannot be staged (no memory for it, or not a strided CPU or CUDA tensor)
// it is saved now, on this thread, behind what is queued.
void save(const std::string& dir, TensorRecord record, const at::Tensor& t);

// Saves `t`'s snapshot now, on this thread, behind what is queued (the
// trap and the guard need its statistics at once), and returns them; with
// `with_fingerprint`, the guard's fingerprint of a CPU tensor too.
TensorStats save_now(const std::string& dir, TensorRecord record, const at::Tensor& t,
                     bool with_fingerprint);

// Appends `line` to dir's manifest, behind the snapshots queued before it.
void append_to_manifest(const std::string& dir, const std::string& line);

// Returns once everything queued so far is written (or failed, which was
// reported as any save failure is).
void wait_for_saves();

}  // namespace aoti_debug_printer::saver
