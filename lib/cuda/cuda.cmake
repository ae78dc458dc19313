# The CUDA layer of the shardpack library, included from lib/CMakeLists.txt after the
# target is made. With the toolkit (SHARDPACK_HAVE_CUDA): cuda.cc and driver.cc, which call
# the CUDA driver through libcuda.so.1, loaded at run time (no CUDA library is linked, so
# programs start on machines without a driver and find no device there), and the kernels
# (kernels.cu), compiled by nvcc into a fatbin of device code that the library embeds.
# Without it: cuda_none.cc, the same API with no device.
if(SHARDPACK_HAVE_CUDA)
  # -gencode for each architecture: "75-real" real code for sm_75, "90" real code and PTX
  # (which later GPUs compile at load time).
  set(shardpack_cuda_gencode)
  set(shardpack_cuda_min_arch 0)
  foreach(arch IN LISTS SHARDPACK_CUDA_ARCHITECTURES)
    if(NOT arch MATCHES "^([0-9]+)(-real)?$")
      message(FATAL_ERROR "SHARDPACK_CUDA_ARCHITECTURES: '${arch}' is not NN or NN-real")
    endif()
    set(number ${CMAKE_MATCH_1})
    if(CMAKE_MATCH_2)
      list(APPEND shardpack_cuda_gencode -gencode arch=compute_${number},code=sm_${number})
    else()
      list(APPEND shardpack_cuda_gencode
           -gencode "arch=compute_${number},code=[sm_${number},compute_${number}]")
    endif()
    if(shardpack_cuda_min_arch EQUAL 0 OR number LESS shardpack_cuda_min_arch)
      set(shardpack_cuda_min_arch ${number})
    endif()
  endforeach()

  # nvcc's host compiler only preprocesses here (no host code is made): its default, or
  # SHARDPACK_CUDA_HOST_COMPILER, whatever compiles the rest of the library.
  set(shardpack_cuda_ccbin)
  if(SHARDPACK_CUDA_HOST_COMPILER)
    set(shardpack_cuda_ccbin -ccbin ${SHARDPACK_CUDA_HOST_COMPILER})
  endif()
  set(shardpack_fatbin ${CMAKE_CURRENT_BINARY_DIR}/shardpack_kernels.fatbin)
  set(shardpack_fatbin_cc ${CMAKE_CURRENT_BINARY_DIR}/shardpack_kernels_fatbin.cc)
  add_custom_command(
    OUTPUT ${shardpack_fatbin}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} --fatbin -std=c++17 -O3 ${shardpack_cuda_ccbin}
            ${shardpack_cuda_gencode} -Xcompiler=-Wall,-Wextra
            -I${CMAKE_CURRENT_LIST_DIR}/.. -o ${shardpack_fatbin}
            ${CMAKE_CURRENT_LIST_DIR}/kernels.cu
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/kernels.cu ${CMAKE_CURRENT_LIST_DIR}/kernels.h
    COMMENT "nvcc: the CUDA kernels' fatbin (${SHARDPACK_CUDA_ARCHITECTURES})"
    VERBATIM)
  add_custom_command(
    OUTPUT ${shardpack_fatbin_cc}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${shardpack_fatbin} -DOUTPUT=${shardpack_fatbin_cc}
            -P ${CMAKE_CURRENT_LIST_DIR}/embed_fatbin.cmake
    DEPENDS ${shardpack_fatbin} ${CMAKE_CURRENT_LIST_DIR}/embed_fatbin.cmake
    VERBATIM)

  target_sources(shardpack PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/cuda.cc
    ${CMAKE_CURRENT_LIST_DIR}/driver.cc
    ${shardpack_fatbin_cc})
  # cuda.h's declarations only: nothing of the toolkit is linked.
  target_include_directories(shardpack PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cuda.cc PROPERTIES
    COMPILE_DEFINITIONS SHARDPACK_CUDA_MIN_ARCH=${shardpack_cuda_min_arch})
  target_compile_definitions(shardpack PRIVATE SHARDPACK_HAVE_CUDA=1)
  target_link_libraries(shardpack PRIVATE ${CMAKE_DL_LIBS})
else()
  target_sources(shardpack PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_none.cc)
endif()
