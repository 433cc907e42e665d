# `pip install .` (scikit-build-core, pyproject.toml): the build sets SKBUILD and Python_EXECUTABLE
# (the installing interpreter). Included twice from the top CMakeLists.txt:
#   TRAINRX_PIP_STAGE=torch    before the options: the torch of that interpreter, when it imports
#                              (`pip install --no-build-isolation .`; in pip's isolated build
#                              environment torch is not importable: the torch-free CLI is built)
#   TRAINRX_PIP_STAGE=install  after the targets: what goes into the wheel, all in one folder
#                              (trainrx/_bin/) so that `trainrx record` finds the probe, the preload
#                              shim, the CUPTI backend and the start-up hook next to the binary as
#                              in build/ (cli/exe_dir.h), with no flag and no environment variable.
if(TRAINRX_PIP_STAGE STREQUAL "torch")
  if(NOT TRAINRX_WITH_TORCH STREQUAL "OFF" AND Python_EXECUTABLE)
    execute_process(COMMAND "${Python_EXECUTABLE}" -c "import torch; print(torch.utils.cmake_prefix_path)"
                    OUTPUT_VARIABLE _torch_prefix ERROR_VARIABLE _torch_error RESULT_VARIABLE _torch_rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_torch_rc EQUAL 0)
      list(PREPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
      message(STATUS "trainrx: building the probe against the torch of ${Python_EXECUTABLE} (${_torch_prefix})")
    else()
      message(STATUS "trainrx: ${Python_EXECUTABLE} cannot import torch: building the torch-free trainrx "
                     "(analyze, diff, summarize; no record). To record, install torch first and run "
                     "pip install --no-build-isolation .")
      # Not a probe for some other LibTorch CMake would find (Debian's libtorch-dev): the environment
      # has no torch for it to attach to. -Ccmake.define.TRAINRX_WITH_TORCH=ON still asks for one.
      if(NOT DEFINED CACHE{TRAINRX_WITH_TORCH} OR "$CACHE{TRAINRX_WITH_TORCH}" STREQUAL "AUTO")
        set(TRAINRX_WITH_TORCH OFF)
      endif()
    endif()
  endif()
  # Installed binaries find libtorch where they were built against it, and the probe next to them.
  set(CMAKE_INSTALL_RPATH "$ORIGIN")
  set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
  return()
endif()

set(_dest trainrx/_bin)
install(TARGETS trainrx trainrx_api trainrx_preload RUNTIME DESTINATION ${_dest} LIBRARY DESTINATION ${_dest})
foreach(_hook ${TRAINRX_PYTHON_HOOK_FILES})
  install(FILES ${PROJECT_BINARY_DIR}/trainrx_python/${_hook} DESTINATION ${_dest}/trainrx_python)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/examples/sample_cpu_training.json.gz DESTINATION trainrx/_data)
if(TRAINRX_HAVE_TORCH)
  install(TARGETS trainrx_probe trainrx-workload RUNTIME DESTINATION ${_dest} LIBRARY DESTINATION ${_dest})
  install(FILES ${PROJECT_BINARY_DIR}/libtrainrx_probe.torch DESTINATION ${_dest})
endif()
if(TRAINRX_HAVE_PARQUET)  # its RPATH finds pyarrow in the same site-packages (exports/CMakeLists.txt)
  install(TARGETS trainrx_parquet LIBRARY DESTINATION ${_dest})
endif()
if(TRAINRX_HAVE_CUDA)
  install(TARGETS trainrx_cupti LIBRARY DESTINATION ${_dest})
endif()
