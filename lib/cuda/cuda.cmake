# The CUDA layer of the shardpack library, included from lib/CMakeLists.txt after the
# target is made. With the toolkit (SHARDPACK_HAVE_CUDA): the runtime calls (cuda.cc, a C++
# file), the kernels (.cu, nvcc) and the static CUDA runtime, so that programs start on
# machines without libcudart or a driver and find no device there. Without it: cuda_none.cc,
# the same API with no device.
if(SHARDPACK_HAVE_CUDA)
  # The kernels are an object library of their own: the project's warning flags
  # (add_compile_options) are GCC's, which nvcc rejects, so here they reach the host
  # compiler through -Xcompiler instead.
  add_library(shardpack_cuda_kernels OBJECT
    ${CMAKE_CURRENT_LIST_DIR}/normalize_kernel.cu
    ${CMAKE_CURRENT_LIST_DIR}/spin_kernel.cu)
  set_property(TARGET shardpack_cuda_kernels PROPERTY COMPILE_OPTIONS
    -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Wno-missing-field-initializers)
  target_include_directories(shardpack_cuda_kernels PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/.. ${CMAKE_CURRENT_LIST_DIR}/../include)
  target_link_libraries(shardpack_cuda_kernels PRIVATE CUDA::cudart_static)

  # The lowest compute capability compiled for ("75-real" -> 75): CheckDevice turns older
  # devices away. 0 (no check) for the symbolic values (all, native).
  set(shardpack_cuda_min_arch 0)
  foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
    if(arch MATCHES "^([0-9]+)")
      if(shardpack_cuda_min_arch EQUAL 0 OR CMAKE_MATCH_1 LESS shardpack_cuda_min_arch)
        set(shardpack_cuda_min_arch ${CMAKE_MATCH_1})
      endif()
    endif()
  endforeach()

  target_sources(shardpack PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/cuda.cc
    $<TARGET_OBJECTS:shardpack_cuda_kernels>)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cuda.cc PROPERTIES
    COMPILE_DEFINITIONS SHARDPACK_CUDA_MIN_ARCH=${shardpack_cuda_min_arch})
  target_compile_definitions(shardpack PRIVATE SHARDPACK_HAVE_CUDA=1)
  target_link_libraries(shardpack PRIVATE CUDA::cudart_static)
else()
  target_sources(shardpack PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_none.cc)
endif()
