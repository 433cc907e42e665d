# Optional parts default to AUTO ("on if found"). ON means required: configure fails with the fix.
# OFF skips the part. A disabled part keeps its headers and reports IsAvailable() == false at run time.
#
#   -DTRAINRX_WITH_TORCH=AUTO|ON|OFF       LibTorch (probes/, workloads/)
#   -DTRAINRX_WITH_CUDA=AUTO|ON|OFF        CUDA toolkit with CUPTI and NVTX3 (collector backend)
#   -DTRAINRX_WITH_NCCL=AUTO|ON|OFF        NCCL (GPU multi-rank workloads)
#   -DTRAINRX_WITH_TESTS=ON|OFF            GoogleTest suites + end-to-end tests
#   -DTRAINRX_WITH_BENCHMARKS=AUTO|ON|OFF  Google Benchmark + bench commands
#   -DTRAINRX_WITH_PARQUET=AUTO|ON|OFF     `export --format parquet` (Arrow C++ of pyarrow; cmake/Pyarrow.cmake)

set(TRAINRX_WITH_TORCH AUTO CACHE STRING "LibTorch support: AUTO, ON or OFF")
set(TRAINRX_WITH_CUDA AUTO CACHE STRING "CUDA/CUPTI/NVTX support: AUTO, ON or OFF")
set(TRAINRX_WITH_NCCL AUTO CACHE STRING "NCCL support: AUTO, ON or OFF")
set(TRAINRX_WITH_PARQUET AUTO CACHE STRING "Parquet export (pyarrow's Arrow C++): AUTO, ON or OFF")
option(TRAINRX_WITH_TESTS "Build tests" ON)
# Sanitizers for every target ("address,undefined" or "thread"; scripts/sanitize sets them) and
# libFuzzer targets (clang; tests/fuzz/).
set(TRAINRX_SANITIZE "" CACHE STRING "-fsanitize= list for all targets (empty: none)")
option(TRAINRX_WITH_FUZZ "libFuzzer targets in tests/fuzz (clang)" OFF)
if(TRAINRX_WITH_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)  # coverage for libFuzzer in the libraries too
endif()
if(TRAINRX_SANITIZE)
  add_compile_options(-fsanitize=${TRAINRX_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${TRAINRX_SANITIZE})
endif()
set(TRAINRX_WITH_BENCHMARKS AUTO CACHE STRING "Benchmarks: AUTO, ON or OFF")
# Warnings are errors (CI: .ci/run configures with it). Third-party headers (LibTorch, CUDA) come in
# through imported targets as system headers, so only our own code is held to it. Off by default:
# a newer compiler's new warning must not stop a user's build.
option(TRAINRX_WERROR "Treat compiler warnings in trainrx's own code as errors" OFF)
if(TRAINRX_WERROR)
  add_compile_options(-Werror)
endif()

# trainrx_optional(<var> <option> <found?> <fix message>)
function(trainrx_optional out option found fix)
  if(${option} STREQUAL "OFF")
    set(${out} OFF PARENT_SCOPE)
  elseif(found)
    set(${out} ON PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option_name} was requested but not found. ${fix}")
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# LibTorch: Debian's libtorch-dev here; on a GPU host the one inside the installed PyTorch
# (pass -DCMAKE_PREFIX_PATH=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')).
set(_torch_found OFF)
if(NOT TRAINRX_WITH_TORCH STREQUAL "OFF")
  # A CUDA build of torch (a cu13 pip wheel) re-finds CUDA in its Caffe2 config through the legacy
  # FindCUDA, which takes the toolkit's root from `nvcc` on PATH: a /usr/local/bin/nvcc link gives
  # /usr/local and "cannot find the CUDA libraries" (torch 2.14.1 here). CMake's CUDAToolkit resolves
  # the link; its root is handed on. And with no GPU to ask, Caffe2 compiles a probe program for the
  # GPU's architecture and fails (CMake 3.25 knows no CUDA20 dialect for nvcc): trainrx compiles no
  # CUDA code, so any architecture list will do, unless the user gave one.
  if(NOT DEFINED CUDA_TOOLKIT_ROOT_DIR AND NOT TRAINRX_WITH_CUDA STREQUAL "OFF")
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND AND CUDAToolkit_BIN_DIR)
      get_filename_component(CUDA_TOOLKIT_ROOT_DIR "${CUDAToolkit_BIN_DIR}" DIRECTORY)
    endif()
  endif()
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  find_package(Torch QUIET)
  if(Torch_FOUND)
    set(_torch_found ON)
  endif()
endif()
set(option_name TRAINRX_WITH_TORCH)
trainrx_optional(TRAINRX_HAVE_TORCH TRAINRX_WITH_TORCH ${_torch_found}
  "Install libtorch-dev (scripts/setup does), point CMAKE_PREFIX_PATH at torch.utils.cmake_prefix_path, or pass -DTRAINRX_WITH_TORCH=OFF.")

set(_cuda_found OFF)
if(NOT TRAINRX_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  # NVTX3 is header-only; CUDAToolkit_INCLUDE_DIRS can be a list (targets/<arch>/include and others).
  find_path(TRAINRX_NVTX3_DIR nvtx3/nvToolsExt.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(CUDAToolkit_FOUND AND TARGET CUDA::cupti AND TRAINRX_NVTX3_DIR)
    set(_cuda_found ON)
  elseif(CUDAToolkit_FOUND)
    message(STATUS "trainrx: CUDA ${CUDAToolkit_VERSION} found, but CUDA::cupti target missing or nvtx3=${TRAINRX_NVTX3_DIR}")
  endif()
endif()
set(option_name TRAINRX_WITH_CUDA)
trainrx_optional(TRAINRX_HAVE_CUDA TRAINRX_WITH_CUDA ${_cuda_found}
  "Install the CUDA toolkit with CUPTI and NVTX3 (standard location /usr/local/cuda), or pass -DTRAINRX_WITH_CUDA=OFF.")

set(_nccl_found OFF)
if(NOT TRAINRX_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include /usr/include)
  find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found ON)
  endif()
endif()
set(option_name TRAINRX_WITH_NCCL)
trainrx_optional(TRAINRX_HAVE_NCCL TRAINRX_WITH_NCCL ${_nccl_found}
  "Install NCCL (libnccl-dev or the CUDA toolkit's copy), or pass -DTRAINRX_WITH_NCCL=OFF.")

set(_bench_found OFF)
if(NOT TRAINRX_WITH_BENCHMARKS STREQUAL "OFF")
  find_package(benchmark QUIET)
  if(benchmark_FOUND)
    set(_bench_found ON)
  endif()
endif()
set(option_name TRAINRX_WITH_BENCHMARKS)
trainrx_optional(TRAINRX_WITH_BENCHMARKS_EFFECTIVE TRAINRX_WITH_BENCHMARKS ${_bench_found}
  "Install libbenchmark-dev (scripts/setup does), or pass -DTRAINRX_WITH_BENCHMARKS=OFF.")
set(TRAINRX_WITH_BENCHMARKS ${TRAINRX_WITH_BENCHMARKS_EFFECTIVE})

include(${CMAKE_CURRENT_LIST_DIR}/Pyarrow.cmake)

# SIMD JSON parsing (x86-64-v3 for the trace parser only; see profiler/CMakeLists.txt).
option(TRAINRX_SIMD "Compile the trace parser for x86-64-v3 (AVX2) with a run-time CPU check" ON)
