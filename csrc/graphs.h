// CUDA graphs (docs/cuda.md): a run captured into a graph runs none of this
// library's host code when the graph replays. So its records are taken at
// capture, as device work and a host call captured into the graph: each
// tensor's statistics kernel lands its results in slots of the capture's
// own pinned ring (device.h), and the run's end captures one host call
// that, at each replay, writes that replay's records, with its index, and
// fires the NaN/Inf trap where a kernel made NaN/Inf in it.
#pragma once

#include "device.h"
#include "record.h"
#include "settings.h"

#include <memory>
#include <string>

namespace aoti_debug_printer::graphs {

// Whether this thread's run is being captured (begin saw the current stream
// capturing).
bool capturing();
// A run that will be ended begins: where the current stream is capturing,
// this thread's records go to the capture until end(). What cannot run
// inside a graph (level 1's saving, the write guard, the sync after
// kernels) is said once per process, and left out.
void begin(const Settings& settings);
// The captured run's records, in the order they were taken. A tensor's,
// with the landing its replays fill (nullptr: written as `r` is, with no
// statistics at replay); a kernel's announcement (level 3); a scalar.
void add(TensorRecord r, std::shared_ptr<device::Landing> landing);
void add_launch(const Where& where);
void add_scalar(const Where& where, const char* type, const std::string& value);
// The captured run ends: the host call that writes its records at each
// replay is captured. Its records, landings and rings are kept for the
// process's life, since the graph may be replayed until then.
void end();
// What the trap found at a replay, which the graph could not stop: the
// message, taken once, for the next run outside the graph to stop with
// (shim.cpp); "" where none.
std::string take_stop();

}  // namespace aoti_debug_printer::graphs
