// The checkpoint directory's housekeeping: retention that uncommits before it deletes, the
// sweep of uncommitted leftovers at start, and which committed checkpoint a resume takes.
#pragma once

#include <string>
#include <vector>

#include "format.h"

namespace braid::ckpt {

// Deletes a committed checkpoint so that a crash at any moment leaves it either committed and
// whole or uncommitted: the manifest goes first (made durable), then the rest.
void remove_checkpoint(const fs::path& folder);

// Removes what a crash can leave in `dir` besides committed checkpoints: step_<N>.tmp folders,
// step_<N> folders without a manifest (a deletion cut short) and latest.tmp. Returns the
// names removed. Call it only while holding the directory's RunLock.
std::vector<std::string> sweep_uncommitted(const fs::path& dir);

// Deletes every checkpoint in `dir`, committed or not, and `latest`; the lock file stays.
void remove_all_checkpoints(const fs::path& dir);

// The folders a resume from `path` may load, newest first: `path` itself when it is a step
// folder; else every committed checkpoint of the directory `path` (the scan decides; `latest`
// is only a hint, and a `latest` that disagrees with the scan is logged). Only the newest
// unless `all`. Empty when there is none.
std::vector<fs::path> resume_candidates(const fs::path& path, bool all);

// `text` with anything unprintable escaped (\xNN) and cut to `limit` characters, for messages
// that quote a file's contents.
std::string printable(const std::string& text, size_t limit = 64);

}  // namespace braid::ckpt
