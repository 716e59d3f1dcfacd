# Multi-process collective tests: coll_suite under mpirun (1..8 ranks; ring, tree, one-shot and the cost model's
# choice), under its own fork
# launcher (TCP bootstrap, no MPI), with DCCL_TRANSPORT=socket, with two pretend hosts (DCCL_HOSTID), and the
# 64 MiB all-to-all. The machine in CI has 2 cores: the matrix is sized per rank count so the whole group takes
# about 8 minutes there, and no two of these tests run at once (RUN_SERIAL).
include(${CMAKE_CURRENT_LIST_DIR}/../common/common.cmake)

set(DCCL_MP_DIR ${CMAKE_CURRENT_LIST_DIR})
add_executable(coll_suite
  ${DCCL_MP_DIR}/coll_suite.c ${DCCL_MP_DIR}/suite_options.c ${DCCL_MP_DIR}/suite_cases.c
  ${DCCL_MP_DIR}/suite_run.c ${DCCL_MP_DIR}/suite_report.c ${DCCL_MP_DIR}/suite_watchdog.c
  ${DCCL_MP_DIR}/suite_device.c)
target_link_libraries(coll_suite PRIVATE dccl dccl_testcommon Threads::Threads)
if(DCCL_HAVE_CUDA_TOOLKIT)
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(coll_suite PRIVATE CUDA::cudart)
  target_compile_definitions(coll_suite PRIVATE DCCL_TEST_HAVE_CUDART)
endif()
if(MPI_C_FOUND)
  target_link_libraries(coll_suite PRIVATE MPI::MPI_C)
  target_compile_definitions(coll_suite PRIVATE DCCL_TEST_HAVE_MPI)
  if(TARGET dccl_mpi AND EXISTS ${PROJECT_SOURCE_DIR}/include/dccl_mpi.h)
    target_link_libraries(coll_suite PRIVATE dccl_mpi)
    target_compile_definitions(coll_suite PRIVATE DCCL_TEST_HAVE_DCCL_MPI)
  endif()
endif()

# Matrices. Full: every type, op and size {0,1,7,1000,1048579}, both placements, roots 0 / middle / last (every
# root up to 65536 elements; above that the root rotates across types and ops), the 64 MiB cases.
set(DCCL_MP_FULL "")
# The tree algorithm serves all-reduce, broadcast and reduce; the other collectives run the same code under
# either setting, so the tree runs leave them to the ring runs.
set(DCCL_MP_TREE_COLLS --colls allreduce,broadcast,reduce)
# Reduced: nine types (every size class and every float format), no 64 MiB cases.
set(DCCL_MP_REDUCED_TYPES --types int8,uint32,int64,half,float,double,bfloat16,f8e4m3,f8e5m2 --no-big)
set(DCCL_MP_REDUCED ${DCCL_MP_REDUCED_TYPES} --sizes 0,1,7,1000,65543)

# A hang fails fast and says where: DCCL's own deadline (no progress for 60 s: the error names the operation and
# the peer), and behind it the suite's watchdog (a case running 120 s: the message names the case).
set(DCCL_MP_ENV DCCL_TIMEOUT=60)

# dccl_mp_test(NAME ranks TIMEOUT seconds [ENV var=value...] [WRAPPER cmd...] ARGS suite arguments...)
function(dccl_mp_test name np)
  cmake_parse_arguments(T "" "TIMEOUT" "ARGS;ENV;WRAPPER" ${ARGN})
  if(NOT MPI_C_FOUND)
    return()
  endif()
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --bind-to none -np ${np}
                   ${MPIEXEC_PREFLAGS} ${T_WRAPPER} $<TARGET_FILE:coll_suite> ${T_ARGS} ${MPIEXEC_POSTFLAGS})
  set(env ${DCCL_MP_ENV} ${T_ENV})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} RUN_SERIAL TRUE PROCESSORS 2 LABELS "mp"
                                          ENVIRONMENT "${env}")
endfunction()

function(dccl_fork_test name np)
  cmake_parse_arguments(T "" "TIMEOUT" "ARGS;ENV" ${ARGN})
  math(EXPR parent_timeout "${T_TIMEOUT} - 30")
  add_test(NAME ${name} COMMAND coll_suite --fork ${np} --timeout ${parent_timeout} ${T_ARGS})
  set(env ${DCCL_MP_ENV} ${T_ENV})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} RUN_SERIAL TRUE PROCESSORS 2 LABELS "mp"
                                          ENVIRONMENT "${env}")
endfunction()

# The checks themselves: planted corruptions are caught (value check and bitwise comparison).
dccl_mp_test(mp.selftest.np3 3 TIMEOUT 120 ARGS --selftest)
dccl_fork_test(mp.selftest.fork2 2 TIMEOUT 120 ARGS --selftest)

# The matrix per rank count and algorithm: full at 2-4 ranks, reduced at 1 (tree: nothing to route), 5 and 8
# (8 ranks on 2 cores is slow).
dccl_mp_test(mp.suite.np1.ring 1 TIMEOUT 300 ARGS --algo ring ${DCCL_MP_FULL})
dccl_mp_test(mp.suite.np1.tree 1 TIMEOUT 300 ARGS --algo tree ${DCCL_MP_REDUCED})
# At 3 ranks every output of every size is written with streaming stores (the default starts at 4 MiB), so every
# type, size and alignment also runs through those copies.
foreach(np 2 3 4)
  set(env "")
  if(np EQUAL 3)
    set(env ENV DCCL_STREAM_BYTES=1)
  endif()
  dccl_mp_test(mp.suite.np${np}.ring ${np} TIMEOUT 900 ${env} ARGS --algo ring ${DCCL_MP_FULL})
  dccl_mp_test(mp.suite.np${np}.tree ${np} TIMEOUT 900 ${env} ARGS --algo tree ${DCCL_MP_TREE_COLLS} ${DCCL_MP_FULL})
endforeach()
foreach(algo ring tree)
  dccl_mp_test(mp.suite.np5.${algo} 5 TIMEOUT 600 ARGS --algo ${algo} ${DCCL_MP_REDUCED})
  dccl_mp_test(mp.suite.np8.${algo} 8 TIMEOUT 600 ARGS --algo ${algo} ${DCCL_MP_REDUCED})
endforeach()
# One-shot all-reduce (every rank reduces every input itself; used for all-reduce only, so only all-reduce runs).
foreach(np 2 3 4)
  dccl_mp_test(mp.suite.np${np}.oneshot ${np} TIMEOUT 600 ARGS --algo oneshot --colls allreduce ${DCCL_MP_FULL})
endforeach()
dccl_mp_test(mp.suite.np8.oneshot 8 TIMEOUT 600 ARGS --algo oneshot --colls allreduce ${DCCL_MP_REDUCED})
# The cost model's own choices, per call and size.
dccl_mp_test(mp.suite.np3.auto 3 TIMEOUT 600 ARGS ${DCCL_MP_REDUCED})
# ... and the large size at 5 and 8 ranks for a few types (every element width class and a low-precision float).
dccl_mp_test(mp.suite.np5.ring.large 5 TIMEOUT 600 ARGS --algo ring --types int32,float,bfloat16,f8e4m3
             --sizes 1048579 --no-big)
dccl_mp_test(mp.suite.np8.tree.large 8 TIMEOUT 600 ARGS --algo tree --types float,bfloat16 --sizes 1048579 --no-big)

# LL on every slot that fits one (DCCL_PROTO=ll; the cost model keeps hosts on bulk), through shm's LL slots, which
# lie apart from the bulk ones: mixed protocols on one link, slot reuse across laps of both.
foreach(algo ring tree)
  dccl_mp_test(mp.suite.np3.${algo}.ll 3 TIMEOUT 600 ENV DCCL_PROTO=ll ARGS --algo ${algo} ${DCCL_MP_REDUCED})
endforeach()

# No MPI at all: TCP bootstrap from a unique id made in the parent, ranks forked. The 2-rank run leaves the
# algorithm to the cost model.
dccl_fork_test(mp.suite.fork2 2 TIMEOUT 900 ARGS ${DCCL_MP_FULL})
dccl_fork_test(mp.suite.fork4 4 TIMEOUT 900 ARGS --algo tree ${DCCL_MP_TREE_COLLS} ${DCCL_MP_FULL})

# Sockets between every pair of ranks.
dccl_mp_test(mp.suite.socket.np2.ring 2 TIMEOUT 600 ENV DCCL_TRANSPORT=socket ARGS --algo ring
             ${DCCL_MP_REDUCED_TYPES})
dccl_mp_test(mp.suite.socket.np4.tree 4 TIMEOUT 600 ENV DCCL_TRANSPORT=socket ARGS --algo tree ${DCCL_MP_REDUCED})
# DCCL_TRANSPORT=staged names the device links' shared-memory transport: host links take shm for it.
dccl_mp_test(mp.suite.staged_name.np2 2 TIMEOUT 300 ENV DCCL_TRANSPORT=staged ARGS --algo ring --types float
             --sizes 0,1,65543 --no-big)

# Two pretend hosts: ranks 0,2 on "A" and 1,3 on "B", so rings and trees cross shm and sockets.
foreach(algo ring tree)
  dccl_mp_test(mp.suite.hostid.np4.${algo} 4 TIMEOUT 600 WRAPPER sh ${DCCL_MP_DIR}/hostid_wrapper.sh
               ARGS --algo ${algo} ${DCCL_MP_REDUCED})
endforeach()
dccl_mp_test(mp.suite.hostid.np4.ring.large 4 TIMEOUT 600 WRAPPER sh ${DCCL_MP_DIR}/hostid_wrapper.sh
             ARGS --algo ring --types int64,float,bfloat16 --sizes 1048579 --no-big)

# 64 MiB from every rank to every rank, all sends posted before any receive, in one group.
dccl_mp_test(mp.alltoall64m.shm.np4 4 TIMEOUT 300 ARGS --alltoall-64m)
dccl_mp_test(mp.alltoall64m.socket.np4 4 TIMEOUT 300 ENV DCCL_TRANSPORT=socket ARGS --alltoall-64m)

# Deterministic mode: the same bits from every algorithm, channel count, chunk size, transport and placement
# (tests/mp/deterministic.c; forks its ranks, one set per configuration).
add_executable(test_deterministic ${DCCL_MP_DIR}/deterministic.c)
target_link_libraries(test_deterministic PRIVATE dccl dccl_testcommon dccl_fault_harness)
foreach(np 3 4)
  add_test(NAME mp.deterministic.np${np} COMMAND test_deterministic ${np})
  set_tests_properties(mp.deterministic.np${np} PROPERTIES TIMEOUT 300 RUN_SERIAL TRUE PROCESSORS 2 LABELS "mp")
endforeach()
