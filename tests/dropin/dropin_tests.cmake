# libnccl.so.2 (cmake/nccl_dropin.cmake): its export table against NVIDIA's, and a program that loads it by name.
add_test(NAME unit.nccl_exports
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dropin/check_nccl_exports.sh $<TARGET_FILE:nccl_dropin>
                 ${PROJECT_SOURCE_DIR}/cmake/nccl_exports.txt)
add_executable(test_nccl_dropin ${CMAKE_CURRENT_SOURCE_DIR}/dropin/test_nccl_dropin.c)
target_include_directories(test_nccl_dropin PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(test_nccl_dropin PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(test_nccl_dropin nccl_dropin)
add_test(NAME unit.nccl_dropin COMMAND test_nccl_dropin $<TARGET_FILE:nccl_dropin>)
set_tests_properties(unit.nccl_exports unit.nccl_dropin PROPERTIES TIMEOUT 120 LABELS "unit")

# ncclMemAlloc as a PyTorch pluggable allocator, for the memory-pool test (tests/dropin/torch_ddp.py --mempool).
add_library(torch_nccl_pool SHARED ${CMAKE_CURRENT_SOURCE_DIR}/dropin/torch_nccl_pool.c)
target_include_directories(torch_nccl_pool PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(torch_nccl_pool PRIVATE nccl_dropin)

# A program compiled against NVIDIA's own nccl.h (the CUDA toolkit's, where it has one) and linked against
# libnccl.so.2.
if(DCCL_HAVE_CUDA_TOOLKIT)
  find_path(DCCL_NVIDIA_NCCL_INCLUDE nccl.h PATHS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
endif()
if(DCCL_NVIDIA_NCCL_INCLUDE)
  add_executable(nvidia_header_program ${CMAKE_CURRENT_SOURCE_DIR}/dropin/nvidia_header_program.c)
  target_include_directories(nvidia_header_program PRIVATE ${DCCL_NVIDIA_NCCL_INCLUDE})
  target_link_libraries(nvidia_header_program PRIVATE nccl_dropin Threads::Threads)
  add_test(NAME unit.nvidia_header_program COMMAND nvidia_header_program)
  set_tests_properties(unit.nvidia_header_program PROPERTIES TIMEOUT 120 LABELS "unit")
endif()

# NVIDIA's nccl-tests (built from ../shared/third_party where it is there) bind every symbol against libnccl.so.2.
add_test(NAME dropin.nccl_tests_bind
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dropin/nccl_tests_bind.sh ${PROJECT_BINARY_DIR}
                 ${PROJECT_SOURCE_DIR}/../shared/third_party/nccl-tests)
set_tests_properties(dropin.nccl_tests_bind PROPERTIES TIMEOUT 1200 SKIP_RETURN_CODE 77 LABELS "dropin"
                                                       DEPENDS unit.nccl_exports)

# Every function dccl.h declares under an NCCL name has NVIDIA's signature (the compiler decides, given NVIDIA's
# nccl.h from the CUDA toolkit, where it has one).
if(DCCL_NVIDIA_NCCL_INCLUDE)
  add_test(NAME unit.nccl_signatures
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/dropin/check_signatures.py
                   ${PROJECT_SOURCE_DIR}/include/dccl.h ${DCCL_NVIDIA_NCCL_INCLUDE} ${CMAKE_C_COMPILER})
  set_tests_properties(unit.nccl_signatures PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS "unit")
endif()
