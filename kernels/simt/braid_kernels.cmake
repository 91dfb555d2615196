# braid's own CUDA kernels on the emulated device (included by kernels/simt/CMakeLists.txt):
#   braid_kernels_simt  every kernels/**/*.cu (and its plain C++ helpers) built for the emulator
#   braid_simt          libbraid whose kernel table registers those as the cuda device
# Test infrastructure: what the GPU tests link to run on the emulated device (tests/simt).

file(GLOB_RECURSE _braid_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.cu)
file(GLOB_RECURSE _braid_cu_host CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/*.cpp)
# Not kernels: the emulator itself; and the NCCL process group (braid_nccl_simt below).
# testing/ (the intrinsics probe) is built, for the tests that use it.
list(FILTER _braid_cu EXCLUDE REGEX "/kernels/simt/")
list(FILTER _braid_cu_host EXCLUDE REGEX "/kernels/(simt|dist)/")

add_library(braid_kernels_simt STATIC ${_braid_cu_host})
target_include_directories(braid_kernels_simt BEFORE PUBLIC ${BRAID_SIMT_DIR}/include)
target_include_directories(braid_kernels_simt PUBLIC ${PROJECT_SOURCE_DIR}/kernels
                                                     ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(braid_kernels_simt PUBLIC BRAID_SIMT=1 BRAID_WITH_INTRINSICS_PROBE=1)
braid_simt_add_kernels(TARGET braid_kernels_simt SOURCES ${_braid_cu}
                       INCLUDE_DIRECTORIES ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/include)
# The kernels call into libbraid (Tensor, errors, the kernel table) and libbraid's table into
# them: the same cycle of static libraries as braid / braid_kernels.
target_link_libraries(braid_kernels_simt PUBLIC braid_simt_runtime fmt::fmt
                      INTERFACE $<LINK_ONLY:braid_simt>)

add_library(braid_simt STATIC ${PROJECT_SOURCE_DIR}/src/ops/kernel_registry.cpp)
target_compile_definitions(braid_simt PUBLIC BRAID_WITH_CUDA=1 BRAID_SIMT=1)
target_link_libraries(braid_simt PUBLIC braid_objects PRIVATE braid_kernels_simt)

# NcclProcessGroup on the emulated device over the stand-in transport (MPI on host copies): every
# kernels/dist source but the NCCL transport and its NCCL helpers. Linked like braid_nccl in the
# real build; BRAID_WITH_NCCL_STANDIN says that "dist/nccl_process_group.h" is there.
file(GLOB _braid_dist_simt CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/dist/*.cpp)
list(FILTER _braid_dist_simt EXCLUDE REGEX "/kernels/dist/nccl_(transport|support)\\.cpp$")
add_library(braid_nccl_simt STATIC ${_braid_dist_simt})
target_compile_definitions(braid_nccl_simt PUBLIC BRAID_WITH_NCCL_STANDIN=1)
target_include_directories(braid_nccl_simt PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(braid_nccl_simt PUBLIC braid_simt braid_kernels_simt MPI::MPI_CXX
                      PRIVATE spdlog::spdlog)
