// A torch.distributed job whose rank stops (the NaN/Inf trap, the write
// guard, a CUDA error) ends as a job: the other ranks would otherwise wait
// in their next collective until the NCCL timeout. The rank that stops
// says so through the job's store (the TCPStore that env:// initialisation
// and torchrun use: MASTER_ADDR, MASTER_PORT), every rank that watches it
// writes one last line naming that rank and its kernel, and all of them
// exit within seconds.
#pragma once

#include "settings.h"

#include <string>

namespace aoti_debug_printer::job {

// The exit status of every rank of a job that a stop ended.
constexpr int kEndedExitCode = 1;

// Before a run's first kernel, where a stop can happen: in a job (RANK,
// WORLD_SIZE > 1, MASTER_ADDR, MASTER_PORT, and end_job on), starts the
// process's one thread that watches the store for another rank's stop.
void watch(const Settings& settings);

// This rank stopped, its record written: in a job, tells the others, waits
// up to two seconds for them to have said it, and ends the process with
// its last line; outside a job, returns and the run stops as it would.
void stopped(const Settings& settings, const std::string& message);

}  // namespace aoti_debug_printer::job
