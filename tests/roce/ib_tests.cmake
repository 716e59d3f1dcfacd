# net_ib tests, run inside the soft-RoCE VM (label roce_guest; see roce.cmake): the collective suite with net_ib
# forced and every rank its own pretend host, the all-to-all group, SIGKILL faults, verbs-object leaks,
# completion errors, zero-copy from registered buffers, the registration cache on a real device, and the context
# shared by a process's communicators.
# Sized for the VM's emulated CPU (about 10x slower than the host): three types and three ops per collective.
if(NOT IBVERBS_LIBRARY OR NOT MPI_C_FOUND)
  return()
endif()

foreach(prog ib_resources ib_regcache_verbs ib_shared_ctx ib_link_pump)
  add_executable(${prog} ${DCCL_ROCE_DIR}/${prog}.c)
  target_link_libraries(${prog} PRIVATE dccl_static)
endforeach()

set(DCCL_IB_SUITE_MATRIX --types float,int32,bfloat16 --ops sum,prod,max --sizes 0,1,7,1000,1048579)
set(DCCL_IB_SUITE_ENV DCCL_TRANSPORT=ib DCCL_SOCKET_IFNAME=v0 DCCL_TIMEOUT=60)

# dccl_ib_suite(NAME ranks QPS n ARGS suite arguments...)
function(dccl_ib_suite name np qps)
  dccl_add_roce_guest_test(NAME ${name} TIMEOUT 600
    COMMAND env ${DCCL_IB_SUITE_ENV} DCCL_IB_QPS_PER_CONN=${qps}
            ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --bind-to none -np ${np}
            sh ${DCCL_ROCE_DIR}/own_host_wrapper.sh $<TARGET_FILE:coll_suite> ${ARGN})
endfunction()

# Ring runs carry every collective; tree runs the three the tree serves. 1 and 2 QPs per link (striping).
dccl_ib_suite(roce.ib.suite.np2.ring 2 2 --algo ring ${DCCL_IB_SUITE_MATRIX})
dccl_ib_suite(roce.ib.suite.np2.tree 2 1 --algo tree --colls allreduce,broadcast,reduce ${DCCL_IB_SUITE_MATRIX})
dccl_ib_suite(roce.ib.suite.np3.ring 3 1 --algo ring ${DCCL_IB_SUITE_MATRIX})
dccl_ib_suite(roce.ib.suite.np3.tree 3 2 --algo tree --colls allreduce,broadcast,reduce ${DCCL_IB_SUITE_MATRIX})
dccl_ib_suite(roce.ib.suite.np4.ring 4 2 --algo ring ${DCCL_IB_SUITE_MATRIX})
dccl_ib_suite(roce.ib.suite.np4.tree 4 1 --algo tree --colls allreduce,broadcast,reduce ${DCCL_IB_SUITE_MATRIX})
dccl_ib_suite(roce.ib.alltoall64m.np4 4 2 --alltoall-64m)

dccl_add_roce_guest_test(NAME roce.ib.peer_killed TIMEOUT 900
                         COMMAND env DCCL_SOCKET_IFNAME=v0 $<TARGET_FILE:fault_peer_killed> ib 50)
dccl_add_roce_guest_test(NAME roce.ib.resources_errors_zero_copy TIMEOUT 300
                         COMMAND env DCCL_SOCKET_IFNAME=v0 $<TARGET_FILE:ib_resources>)
# One slot per FIFO: every send re-reads the FIFO head, so a head moved backwards would stall the writer before
# its first write (the test's own QP surgery once did that, and the case hung in CI about one run in three).
dccl_add_roce_guest_test(NAME roce.ib.resources_errors_one_slot TIMEOUT 300
                         COMMAND env DCCL_SOCKET_IFNAME=v0 DCCL_NSLOTS=1 $<TARGET_FILE:ib_resources>)
dccl_add_roce_guest_test(NAME roce.ib.regcache_verbs TIMEOUT 120 COMMAND $<TARGET_FILE:ib_regcache_verbs> rxe0)
# 16 communicators of one process share one context, PD and proxy thread; one's failure spares the others; a
# forked child neither uses nor frees the parent's.
dccl_add_roce_guest_test(NAME roce.ib.shared_ctx TIMEOUT 300
                         COMMAND env DCCL_SOCKET_IFNAME=v0 $<TARGET_FILE:ib_shared_ctx>)

# The host side of device links over net_ib: a link pump moves slots that threads post and drain as kernels would
# (nobody calls progress), through a pause that puts the pumps and the proxy to sleep; then the link still works.
dccl_add_roce_guest_test(NAME roce.ib.link_pump TIMEOUT 300
                         COMMAND env DCCL_SOCKET_IFNAME=v0 $<TARGET_FILE:ib_link_pump>)

# Selection: between pretend hosts net_ib is chosen by itself; when it cannot be made (a GID index the port does
# not have), both ends warn with the reason and use sockets, and the collectives still pass.
foreach(case auto fallback)
  set(extra "")
  set(expect "connected to rank 1 lane 0 via net_ib")
  if(case STREQUAL "fallback")
    set(extra DCCL_IB_GID_INDEX=77)
    set(expect "net_ib link to rank 1 .*could not be made .*DCCL_IB_GID_INDEX=77.*. using socket")
  endif()
  dccl_add_roce_guest_test(NAME roce.ib.select_${case} TIMEOUT 300
    COMMAND ${DCCL_EXPECT_OUTPUT} "${expect}"
            env DCCL_SOCKET_IFNAME=v0 DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=INIT,NET ${extra}
            ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --bind-to none -np 2
            sh ${DCCL_ROCE_DIR}/own_host_wrapper.sh $<TARGET_FILE:coll_suite>
            --colls allreduce,sendrecv --types float --ops sum --sizes 1000 --no-big)
endforeach()

# An idle communicator over net_ib costs no CPU: its proxy thread falls asleep on the completion channel.
dccl_add_roce_guest_test(NAME roce.ib.idle_cpu TIMEOUT 300 COMMAND env DCCL_SOCKET_IFNAME=v0
                         $<TARGET_FILE:fault_idle_cpu> ib)

# Two RDMA ports (a second soft-RoCE device made for the test): lanes spread over both, every collective right.
dccl_add_roce_guest_test(NAME roce.ib.two_rails TIMEOUT 300
                         COMMAND ${DCCL_ROCE_DIR}/two_rails.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:coll_suite>)
