# CUDA tests. CI has the toolkit but no GPU: they are part of the build (so CI compiles them) but not ctest cases;
# scripts/gpu-lab.sh runs them on the GPU machine (each exits 77 when no device is usable).
if(DCCL_HAVE_CUDA_TOOLKIT)
  # reduce_math.h and schedule.h run in a kernel and on the host over the same vectors; results must match.
  add_executable(device_shared_test ${CMAKE_CURRENT_SOURCE_DIR}/cuda/device_shared_test.cu)
  target_include_directories(device_shared_test PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  set_target_properties(device_shared_test PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17)
  # The directory's warning flags are GCC's; hand them to the host compiler and make warnings fatal
  # (nvcc's and the host compiler's) when DCCL_WERROR is on.
  set_property(TARGET device_shared_test PROPERTY COMPILE_OPTIONS "")
  target_compile_options(device_shared_test PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wshadow,-Wno-unused-parameter>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${DCCL_WERROR}>>:--Werror=all-warnings>)
  # The host-buffer library's behaviour next to a real GPU (device pointers refused, streams waited for,
  # dma-buf export). A C program on the CUDA runtime; the library itself still only dlopens the driver.
  find_package(CUDAToolkit REQUIRED)
  add_executable(cuda_host_paths ${CMAKE_CURRENT_SOURCE_DIR}/cuda/cuda_host_paths.c)
  target_link_libraries(cuda_host_paths PRIVATE dccl_static CUDA::cudart)
endif()
