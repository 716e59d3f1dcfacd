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
