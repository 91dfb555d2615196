# Finds braid's host dependencies, all from Debian packages (scripts/install_deps.sh).
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Protobuf REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/Mpi.cmake)

# OpenBLAS, the OpenMP build: its threads and our `#pragma omp` loops share one pool.
find_package(PkgConfig REQUIRED)
set(_braid_openblas_pc /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "${_braid_openblas_pc}:$ENV{PKG_CONFIG_PATH}")
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
if(NOT OPENBLAS_LIBRARY_DIRS MATCHES "openmp")
  message(WARNING "OpenBLAS found in '${OPENBLAS_LIBRARY_DIRS}', which is not the OpenMP build; "
                  "install libopenblas-openmp-dev so BLAS and braid share one thread pool")
endif()

if(BRAID_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(BRAID_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
