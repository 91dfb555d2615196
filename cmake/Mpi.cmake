# Finds MPI (Open MPI from Debian's openmpi-bin + libopenmpi-dev): the CPU collective backend,
# the launcher of multi-rank tests (MPIEXEC_EXECUTABLE) and the bootstrap of NCCL.
# The C bindings only: braid does not use the deprecated MPI C++ bindings.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI REQUIRED COMPONENTS CXX)
message(STATUS "braid: MPI ${MPI_CXX_VERSION}, launcher ${MPIEXEC_EXECUTABLE}")
