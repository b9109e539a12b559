// Level 1: snapshots that torch.load(path, weights_only=True) reads back,
// plus a manifest.jsonl beside them.
#pragma once

#include "record.h"

#include <functional>
#include <optional>
#include <string>

namespace aoti_debug_printer {

// Saves `host` (to_host of the recorded tensor) under `dir` and appends the
// record, with the file's name, to dir/manifest.jsonl. Returns the file name
// (relative to dir). Throws std::runtime_error with a message that names the
// directory and the OS error; nothing half-written is left under a final name.
// Before a run's first snapshot in `dir` goes its environment line:
// environment_to_note's on this thread, or `environment` where given (the
// saver's thread writes what the model's thread noted; "" for none).
std::string save_snapshot(const std::string& dir, const TensorRecord& record,
                          const at::Tensor& host,
                          const std::optional<std::string>& environment = std::nullopt);
// The environment line of `record`'s run (its numerics settings and where
// its program's nodes came from, as this thread knows them now), where this
// thread has noted none for that run in `dir` yet; else "".
std::string environment_to_note(const std::string& dir, const TensorRecord& record);

// Runs `save`. The first failure is reported in full; later ones are only
// counted and summed up once when the process exits, so a full disk gives
// one error, not thousands. The model keeps running either way.
void saving(const std::function<void()>& save);
// Number of snapshots that could not be saved since the process started.
int64_t save_failures();

// `name` in directory `dir`, with one slash between them however `dir`
// ends (the default dump directory, upstream's, ends in one).
std::string in_dir(const std::string& dir, const std::string& name);

// Appends one JSON line (newline included) to dir/manifest.jsonl, creating
// the directory if needed. Throws std::runtime_error like save_snapshot.
void append_to_manifest(const std::string& dir, const std::string& line);

// Saves the host copies `watched` took before launch (replay, trap) as the
// inputs of `at_kernel`'s kernel, noting each file in its WatchedArg.
void save_watched(const std::string& dir, const Where& at_kernel, std::vector<WatchedArg>& watched);

// A name part made safe for any file system: only [A-Za-z0-9_.-], no leading
// dot, at most 80 characters. Kernel and argument names go through this, so
// no name can leave the directory.
std::string safe_name_part(const std::string& s);

}  // namespace aoti_debug_printer
