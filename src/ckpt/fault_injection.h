// Crash points for the checkpoint fault tests (tests/dist/checkpoint_faults.sh). Unset in
// normal runs; BRAID_CKPT_FAULT="<point>:<step>[:<rank>]" makes the process SIGKILL itself
// (or, for "enospc", fail a write as a full disk would) when checkpoint <step> reaches
// <point> on <rank> (every rank when omitted).
#pragma once

#include <cstdint>
#include <string_view>

namespace braid::ckpt {

// Points, in protocol order: "window" (an overlapped window copying a block), "replay"
// (before the replay), "mid_file" (half of a shard file written), "before_commit" (rank
// manifests written, global manifest not), "latest" (folder renamed, latest not yet updated).
bool fault_requested(std::string_view point, int64_t step, int rank);
// SIGKILLs this process if the fault is requested.
void crash_if_requested(std::string_view point, int64_t step, int rank);

}  // namespace braid::ckpt
