# Included by csrc/CMakeLists.txt (libmyops.so) and csrc/deploy/CMakeLists.txt (the C++ runner) before
# find_package(Torch): it names the CUDA toolkit that torch's config of a CUDA build asks for, so that the seed
# tutorial's command works on a machine without a system toolkit.
#
# torch's CMake config of a CUDA build demands a CUDA toolkit (nvcc, cudart, nvrtc) even for a library
# without CUDA code. A toolkit the user names (CUDA_HOME, CUDA_TOOLKIT_ROOT_DIR or CMAKE_CUDA_COMPILER) is
# used as it is. Otherwise: the pip toolkit that requirements.txt installs beside torch
# (site-packages/nvidia/cu13), laid out in the build tree the way nvcc and CMake expect it: lib64/ with
# the linker names (libcudart.so), links to the rest, and nvcc as a hard link, because nvcc resolves
# symbolic links to find its own folder. myops/toolchain.py makes the same layout for JIT builds.
function(myops_lay_out_pip_toolkit root layout)
  file(MAKE_DIRECTORY "${layout}/bin" "${layout}/lib64")
  foreach(folder include nvvm lib)
    file(CREATE_LINK "${root}/${folder}" "${layout}/${folder}" SYMBOLIC)
  endforeach()
  file(GLOB tools "${root}/bin/*")
  foreach(tool IN LISTS tools)
    get_filename_component(name "${tool}" NAME)
    if(name STREQUAL "nvcc")
      file(CREATE_LINK "${tool}" "${layout}/bin/nvcc" COPY_ON_ERROR)
    else()
      file(CREATE_LINK "${tool}" "${layout}/bin/${name}" SYMBOLIC)
    endif()
  endforeach()
  file(GLOB libraries "${root}/lib/*")
  foreach(library IN LISTS libraries)
    get_filename_component(name "${library}" NAME)
    file(CREATE_LINK "${library}" "${layout}/lib64/${name}" SYMBOLIC)
    if(name MATCHES "^(lib[^.]+)\\.so\\.[0-9]+$")
      file(CREATE_LINK "${library}" "${layout}/lib64/${CMAKE_MATCH_1}.so" SYMBOLIC)
    endif()
  endforeach()
endfunction()

set(pip_root "")
foreach(prefix IN LISTS CMAKE_PREFIX_PATH)
  # torch's prefix is site-packages/torch/share/cmake
  file(GLOB pip_nvcc "${prefix}/../../../nvidia/cu[0-9]*/bin/nvcc")
  if(pip_nvcc AND NOT pip_root)
    list(GET pip_nvcc 0 pip_nvcc)
    get_filename_component(pip_root "${pip_nvcc}/../.." ABSOLUTE)
  endif()
endforeach()
set(pip_layout "${CMAKE_BINARY_DIR}/cuda-toolkit")
if((NOT CUDA_TOOLKIT_ROOT_DIR AND NOT CMAKE_CUDA_COMPILER) OR CUDA_TOOLKIT_ROOT_DIR STREQUAL pip_layout)
  set(toolkit "")
  if(DEFINED ENV{CUDA_HOME})
    set(toolkit "$ENV{CUDA_HOME}")
    # A minimal toolkit may lack nvrtc, which torch's config links: take pip's (a dependency of torch).
    file(GLOB pip_nvrtc "${pip_root}/lib/libnvrtc.so.[0-9]*")
    if(NOT EXISTS "${toolkit}/lib64/libnvrtc.so" AND pip_nvrtc)
      set(CUDA_nvrtc_LIBRARY "${pip_nvrtc}" CACHE FILEPATH "libnvrtc")
    endif()
  elseif(pip_root)
    set(toolkit "${pip_layout}")  # laid out again on every configure: cheap, and follows a reinstall
    myops_lay_out_pip_toolkit("${pip_root}" "${toolkit}")
    message(STATUS "myops: CUDA toolkit from pip: ${pip_root}")
  endif()
  if(toolkit)
    # Named explicitly: nvcc on PATH may be a wrapper script outside any toolkit.
    set(CUDA_TOOLKIT_ROOT_DIR "${toolkit}" CACHE PATH "CUDA toolkit root" FORCE)
    set(CMAKE_CUDA_COMPILER "${toolkit}/bin/nvcc" CACHE FILEPATH "nvcc" FORCE)
  endif()
endif()
