# The test checker library: deterministic inputs, reference results, acceptance rules, guarded buffers.
# Other test groups may include this file too; it defines its targets once.
if(NOT TARGET dccl_testcommon)
  set(DCCL_TESTCOMMON_DIR ${CMAKE_CURRENT_LIST_DIR})
  add_library(dccl_testcommon STATIC
    ${DCCL_TESTCOMMON_DIR}/tc_types.c ${DCCL_TESTCOMMON_DIR}/tc_data.c ${DCCL_TESTCOMMON_DIR}/tc_check.c
    ${DCCL_TESTCOMMON_DIR}/tc_buffer.c)
  # Only the public header is needed (for the type enums); the checker shares no code with the library.
  target_include_directories(dccl_testcommon PUBLIC ${DCCL_TESTCOMMON_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(dccl_testcommon PUBLIC m Threads::Threads)

  add_executable(checker_selftest ${DCCL_TESTCOMMON_DIR}/checker_selftest.c)
  target_link_libraries(checker_selftest PRIVATE dccl_testcommon)
  add_test(NAME common.checker_selftest COMMAND checker_selftest)
  set_tests_properties(common.checker_selftest PROPERTIES TIMEOUT 120 LABELS "mp;common")
endif()
