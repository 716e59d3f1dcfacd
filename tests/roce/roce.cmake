# RDMA tests that need a real verbs stack run inside the soft-RoCE VM (scripts/roce-vm.sh): they carry the label
# roce_guest, and the host runs them all through one test, roce.vm_suite, which boots the VM once. The host's
# own runs (scripts/run-tests.sh) exclude roce_guest; run on the host, such a test fails and says how to run it.
set(DCCL_ROCE_DIR ${CMAKE_CURRENT_LIST_DIR})

# dccl_add_roce_guest_test(NAME name COMMAND cmd args... [TIMEOUT seconds])
# COMMAND is not the test's first word (a guard runs first), so name a built target as $<TARGET_FILE:target>.
function(dccl_add_roce_guest_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "COMMAND" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${DCCL_ROCE_DIR}/guest_only.sh ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "roce_guest" TIMEOUT ${T_TIMEOUT})
endfunction()

# The lab itself: rxe0 is up, has the RoCEv2 GID of 10.9.0.1, carries an RC pingpong, and `rdma resource` counts
# a process's verbs objects (what leak checks will use).
foreach(check port gid pingpong resources)
  dccl_add_roce_guest_test(NAME roce.lab.${check} COMMAND ${DCCL_ROCE_DIR}/lab_check.sh ${check})
endforeach()

# Boots the VM once and runs every roce_guest test in it (booting takes about 10 s on 2 cores).
add_test(NAME roce.vm_suite
         COMMAND ${PROJECT_SOURCE_DIR}/scripts/roce-vm.sh --timeout 2400 --writable ${PROJECT_BINARY_DIR}
                 -- ${DCCL_ROCE_DIR}/vm_suite.sh
         WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
set_tests_properties(roce.vm_suite PROPERTIES LABELS "roce" TIMEOUT 2460 RUN_SERIAL TRUE PROCESSORS 2)
