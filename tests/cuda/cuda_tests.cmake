# CUDA tests. CI has the toolkit but no GPU: they are part of the build (so CI compiles them) but not ctest cases;
# scripts/gpu-lab.sh runs them on the GPU machine (each exits 77 when no device is usable).
if(DCCL_HAVE_CUDA_TOOLKIT)
  # reduce_math.h and schedule.h run in a kernel and on the host over the same vectors; results must match.
  add_executable(device_shared_test ${CMAKE_CURRENT_SOURCE_DIR}/cuda/device_shared_test.cu)
  target_include_directories(device_shared_test PRIVATE
    ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  set_target_properties(device_shared_test PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17)
  # The host-buffer library's behaviour next to a real GPU (device pointers refused, streams waited for, stream
  # NULL included, dma-buf export). A C program on the CUDA runtime with one small kernel (late_writer.cu); the
  # library itself still only dlopens the driver.
  find_package(CUDAToolkit REQUIRED)
  add_executable(cuda_host_paths ${CMAKE_CURRENT_SOURCE_DIR}/cuda/cuda_host_paths.c
                                 ${CMAKE_CURRENT_SOURCE_DIR}/cuda/late_writer.cu)
  target_link_libraries(cuda_host_paths PRIVATE dccl_static CUDA::cudart)
  # FIFOs laid out by pure/conn_desc.h, both protocols: a kernel and a host thread (the host end through the
  # library's dccl_conn functions), and two kernels in two processes through a cuMem POSIX-fd mapping (run under MPS).
  add_executable(conn_host_test ${CMAKE_CURRENT_SOURCE_DIR}/cuda/conn_host_test.cu
                                ${CMAKE_CURRENT_SOURCE_DIR}/cuda/conn_host_side.c)
  add_executable(conn_ipc_test ${CMAKE_CURRENT_SOURCE_DIR}/cuda/conn_ipc_test.cu)
  foreach(t conn_host_test conn_ipc_test)
    target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
    set_target_properties(${t} PROPERTIES CUDA_ARCHITECTURES 90 CUDA_STANDARD 17)
  endforeach()
  target_link_libraries(conn_host_test PRIVATE dccl_static CUDA::cudart)
  target_link_libraries(conn_ipc_test PRIVATE CUDA::cudart)
  # Collectives on device buffers, every rank on GPU 0 in one process (the GPU engine, issue 10).
  add_executable(gpu_colls ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_colls.c)
  target_link_libraries(gpu_colls PRIVATE dccl CUDA::cudart)
  # Graph capture and replay, the legacy-stream refusal, host operations after device ones.
  add_executable(gpu_graphs ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_graphs.c)
  target_link_libraries(gpu_graphs PRIVATE dccl CUDA::cudart)
endif()
