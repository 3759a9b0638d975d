# LibTorch from the PyPI torch wheel pinned in scripts/setup.sh.
#
# We link libtorch_cpu and libc10 directly instead of going through the wheel's
# TorchConfig.cmake: that file also wants the CUDA toolkit the wheel was built with, and
# every CPU feature we use lives in torch_cpu. CUDA parts are added by their own targets.
set(ZEROTRAIN_TORCH_DIR "" CACHE PATH "The torch package directory (site-packages/torch)")
set(ZEROTRAIN_PYTHON "" CACHE FILEPATH "Python interpreter that has the pinned torch")

# Under pip (scikit-build-core), the interpreter doing the install is the one whose torch counts.
if(NOT ZEROTRAIN_PYTHON AND DEFINED SKBUILD AND Python_EXECUTABLE)
  set(ZEROTRAIN_PYTHON ${Python_EXECUTABLE} CACHE FILEPATH "" FORCE)
endif()
if(NOT ZEROTRAIN_TORCH_DIR)
  if(NOT ZEROTRAIN_PYTHON)
    find_program(ZEROTRAIN_PYTHON NAMES python3 REQUIRED)
  endif()
  execute_process(
    COMMAND ${ZEROTRAIN_PYTHON} -c "import importlib.util,os;print(os.path.dirname(importlib.util.find_spec('torch').origin))"
    OUTPUT_VARIABLE ZEROTRAIN_TORCH_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 AND DEFINED SKBUILD)
    # pip's default isolated build environment has no torch (it would have to fetch a second
    # copy of the wheel and could build against another torch than the one that runs it).
    message(FATAL_ERROR "No torch found for the Python that pip builds with (${ZEROTRAIN_PYTHON}): install the "
            "package with `pip install --no-build-isolation .` from an environment that has torch==2.15.0 and "
            "scikit-build-core (docs/python.md)")
  elseif(NOT _rc EQUAL 0)
    message(FATAL_ERROR "No torch found for ${ZEROTRAIN_PYTHON}; run scripts/setup.sh, or pass -DZEROTRAIN_TORCH_DIR=<site-packages/torch>")
  endif()
endif()

set(_torch_lib ${ZEROTRAIN_TORCH_DIR}/lib)
foreach(_lib torch_cpu c10)
  if(NOT EXISTS ${_torch_lib}/lib${_lib}.so)
    message(FATAL_ERROR "${_torch_lib}/lib${_lib}.so not found: ZEROTRAIN_TORCH_DIR=${ZEROTRAIN_TORCH_DIR} is not a torch wheel install")
  endif()
endforeach()

add_library(zerotrain_torch INTERFACE)
add_library(zerotrain::torch ALIAS zerotrain_torch)
target_include_directories(zerotrain_torch SYSTEM INTERFACE
  ${ZEROTRAIN_TORCH_DIR}/include
  ${ZEROTRAIN_TORCH_DIR}/include/torch/csrc/api/include)
# The torch wheels are built with the C++11 ABI since 2.7 (torch._C._GLIBCXX_USE_CXX11_ABI).
target_compile_definitions(zerotrain_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
target_link_libraries(zerotrain_torch INTERFACE
  ${_torch_lib}/libtorch_cpu.so ${_torch_lib}/libc10.so)
# The wheel's libraries are found at run time through the rpath, so no LD_LIBRARY_PATH.
set(CMAKE_BUILD_RPATH ${_torch_lib})
set(CMAKE_INSTALL_RPATH ${_torch_lib})
message(STATUS "zerotrain: LibTorch from ${ZEROTRAIN_TORCH_DIR}")
