# Decides whether this build compiles CUDA (BRAID_CUDA=AUTO|ON|OFF) and finds its libraries.
set(BRAID_WITH_CUDA OFF)
if(NOT BRAID_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(_braid_nvcc nvcc PATHS /usr/local/cuda/bin)
    if(_braid_nvcc)
      set(CMAKE_CUDA_COMPILER ${_braid_nvcc})
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Must precede enable_language, which otherwise fixes nvcc's own default (sm_75).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # Hopper is the target; 80 keeps Ampere working
    endif()
    enable_language(CUDA)
    # Debian 12's stock FindCUDAToolkit (CMake 3.25.1) marks CUDA::nvToolsExt deprecated
    # whenever the project's minimum CMake is 3.25 or newer, without checking that the target
    # exists. CUDA 13 ships no libnvToolsExt (NVTX is the header-only nvtx3 now), so that
    # set_property fails and configuring stops (the copy on braid's build machines is patched to
    # check the target first, which hid it). The module decides from CMAKE_MINIMUM_REQUIRED_VERSION
    # alone, so it sees 3.24 for this one call: only that deprecation mark is skipped, on a target
    # braid never links; every library braid uses is found exactly as before. Keep this the only
    # find_package(CUDAToolkit) in the build: another call would stop at the same line (the
    # installed package's, cmake/braidConfig.cmake.in, repeats this for its consumers).
    set(_braid_cmake_minimum ${CMAKE_MINIMUM_REQUIRED_VERSION})
    set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${_braid_cmake_minimum})
    unset(_braid_cmake_minimum)
    set(BRAID_WITH_CUDA ON)
  elseif(BRAID_CUDA STREQUAL "ON")
    message(FATAL_ERROR "BRAID_CUDA=ON but no CUDA compiler (nvcc) was found; install the CUDA "
                        "toolkit or configure with -DBRAID_CUDA=AUTO or OFF")
  endif()
endif()
if(BRAID_WITH_CUDA)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  message(STATUS "braid: CUDA enabled (${CMAKE_CUDA_COMPILER}, archs ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "braid: CUDA disabled; CPU-only build")
endif()
