// Where a training process runs: training.device, and which device of the machine is this
// rank's.
#pragma once

#include <functional>
#include <string>

#include "braid/core/device.h"

namespace braid::train {

// This process's rank among the ranks of its machine, as the MPI launcher tells it (`env`
// looks a variable up, nullptr when unset, as std::getenv does): OMPI_COMM_WORLD_LOCAL_RANK
// (Open MPI), MPI_LOCALRANKID (MPICH, Intel MPI), SLURM_LOCALID (srun), the first one set;
// 0 when none is. A value that is not a non-negative integer throws braid::Error naming it.
int launcher_local_rank(const std::function<const char*(const char*)>& env);

// "" when training.device `name` can run here, else what is wrong and what to do: an unknown
// name, "cuda" in a build without the CUDA backend, or no CUDA device visible.
std::string device_problem(const std::string& name);

// The device of training.device `name` for this process: the CPU, or cuda:(local rank) (the
// local rank from the launcher; an error when the machine has fewer devices).
Device training_device(const std::string& name, const std::function<const char*(const char*)>& env);

}  // namespace braid::train
