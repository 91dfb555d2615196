# Finds braid's host dependencies, all from Debian packages (scripts/install_deps.sh).
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Protobuf REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/Mpi.cmake)

# The CPU GEMM library (src/ops/cpu/sgemm_backend.cpp). oneDNN (libdnnl-dev) is the default: its
# JIT sgemm is faster than OpenBLAS's at training shapes. Its CMake package insists on OpenCL
# development files for a GPU runtime braid never uses, so header and library are found directly.
set(BRAID_CPU_GEMM "onednn" CACHE STRING "CPU GEMM library: onednn or openblas")
set_property(CACHE BRAID_CPU_GEMM PROPERTY STRINGS onednn openblas)
if(BRAID_CPU_GEMM STREQUAL "onednn")
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(DNNL_LIBRARY dnnl)
  if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
    message(FATAL_ERROR "BRAID_CPU_GEMM=onednn, but oneDNN was not found (header "
                        "oneapi/dnnl/dnnl.h: '${DNNL_INCLUDE_DIR}', library: '${DNNL_LIBRARY}'); "
                        "install libdnnl-dev (scripts/install_deps.sh) or configure with "
                        "-DBRAID_CPU_GEMM=openblas")
  endif()
  add_library(braid_dnnl INTERFACE)
  target_include_directories(braid_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
  target_link_libraries(braid_dnnl INTERFACE ${DNNL_LIBRARY})
  target_compile_definitions(braid_dnnl INTERFACE BRAID_CPU_GEMM_ONEDNN=1)
  message(STATUS "braid CPU GEMM: oneDNN (${DNNL_LIBRARY})")
elseif(BRAID_CPU_GEMM STREQUAL "openblas")
  message(STATUS "braid CPU GEMM: OpenBLAS")
else()
  message(FATAL_ERROR "BRAID_CPU_GEMM is '${BRAID_CPU_GEMM}'; use onednn or openblas")
endif()

# OpenBLAS, the OpenMP build: its threads and our `#pragma omp` loops share one pool. The
# openblas GEMM backend calls it; the micro benchmarks compare against it either way.
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
