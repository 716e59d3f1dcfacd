# Fault tests: ranks are forked from one parent process (no MPI). Each parent checks /dev/shm for dccl-* leftovers
# after its ranks exit. Label `faults` on all; `slow` on the one that waits 60 s on purpose (still run in CI).
set(DCCL_FAULTS_DIR ${CMAKE_CURRENT_LIST_DIR})

add_library(dccl_fault_harness STATIC ${DCCL_FAULTS_DIR}/fault_harness.c)
target_include_directories(dccl_fault_harness PUBLIC ${DCCL_FAULTS_DIR} ${PROJECT_SOURCE_DIR}/include)

# fault_args links the static library only to reach dccl_clear_error (src/util/error.h).
foreach(name fault_args fault_peer_killed fault_slow_peer fault_fork fault_idle_cpu fault_oversubscribed fault_mismatch fault_stall)
  add_executable(${name} ${DCCL_FAULTS_DIR}/${name}.c)
  if(name STREQUAL "fault_args")
    target_link_libraries(${name} PRIVATE dccl_fault_harness dccl_static)
  else()
    target_link_libraries(${name} PRIVATE dccl_fault_harness dccl)
  endif()
endforeach()

add_test(NAME faults.invalid_args COMMAND fault_args)
add_test(NAME faults.peer_killed_shm COMMAND fault_peer_killed shm 50)
add_test(NAME faults.peer_killed_socket COMMAND fault_peer_killed socket 50)
add_test(NAME faults.slow_peer_timeout COMMAND fault_slow_peer timeout)
add_test(NAME faults.slow_peer_default COMMAND fault_slow_peer default)
add_test(NAME faults.fork_shm COMMAND fault_fork shm)
add_test(NAME faults.fork_socket COMMAND fault_fork socket)
add_test(NAME faults.idle_cpu COMMAND fault_idle_cpu)
add_test(NAME faults.oversubscribed_shm COMMAND fault_oversubscribed shm)
add_test(NAME faults.oversubscribed_socket COMMAND fault_oversubscribed socket)
add_test(NAME faults.mismatch_shm COMMAND fault_mismatch shm)
add_test(NAME faults.mismatch_socket COMMAND fault_mismatch socket)
add_test(NAME faults.stall_report_shm COMMAND fault_stall shm)
add_test(NAME faults.stall_report_socket COMMAND fault_stall socket)

set_tests_properties(faults.invalid_args faults.peer_killed_shm faults.peer_killed_socket faults.slow_peer_timeout
                     faults.slow_peer_default faults.fork_shm faults.fork_socket faults.idle_cpu
                     faults.oversubscribed_shm faults.oversubscribed_socket faults.mismatch_shm faults.mismatch_socket
                     faults.stall_report_shm faults.stall_report_socket PROPERTIES LABELS faults TIMEOUT 300)
set_tests_properties(faults.slow_peer_default PROPERTIES LABELS "faults;slow" TIMEOUT 150)
# Timing-bound tests: 8 busy ranks or 100 kill trials beside them would stretch each other's deadlines.
set_tests_properties(faults.peer_killed_shm faults.peer_killed_socket faults.oversubscribed_shm
                     faults.oversubscribed_socket faults.slow_peer_timeout PROPERTIES RESOURCE_LOCK dccl_fault_cpu)
