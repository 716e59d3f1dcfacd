# CUDA tests, label gpu. CI has the toolkit but no GPU: it compiles them, and each exits 77 there (ctest reports it
# skipped, not passed); scripts/gpu-lab.sh runs `ctest -L gpu` on the GPU machine.
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
  # Communicators whose kernels run at once on one GPU (their launches share its resident CTAs).
  add_executable(gpu_concurrent ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_concurrent.c)
  target_link_libraries(gpu_concurrent PRIVATE dccl CUDA::cudart)

  function(dccl_gpu_test name)
    cmake_parse_arguments(T "" "TIMEOUT" "COMMAND;ENV" ${ARGN})
    add_test(NAME gpu.${name} COMMAND ${T_COMMAND})
    if(NOT T_TIMEOUT)
      set(T_TIMEOUT 300)
    endif()
    set_tests_properties(gpu.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT}
                         ENVIRONMENT "${T_ENV}")
  endfunction()
  dccl_gpu_test(device_shared COMMAND device_shared_test)
  dccl_gpu_test(cuda_host_paths COMMAND cuda_host_paths)
  dccl_gpu_test(conn_host COMMAND conn_host_test)
  # Two processes' kernels run at once only under MPS: the wrapper runs a daemon of its own.
  dccl_gpu_test(conn_ipc_mps COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cuda/with_mps.sh $<TARGET_FILE:conn_ipc_test>)
  dccl_gpu_test(graphs COMMAND gpu_graphs)
  dccl_gpu_test(colls_1rank COMMAND gpu_colls 1)
  foreach(n 2 3 4)
    dccl_gpu_test(colls_${n}ranks COMMAND gpu_colls ${n})
    foreach(algo ring tree oneshot direct)
      dccl_gpu_test(colls_${n}ranks_${algo} COMMAND gpu_colls ${n} ENV DCCL_ALGO=${algo})
    endforeach()
  endforeach()
  # The staged path (transports/shm/shm_staged.c): device links through pinned shared host memory.
  foreach(n 2 4)
    dccl_gpu_test(colls_${n}ranks_staged COMMAND gpu_colls ${n} ENV DCCL_TRANSPORT=shm)
  endforeach()
  # A broadcast whose ranks name different roots, over staged links: the stall report names both calls, and each
  # rank whose kernels stall logs what its links in host memory show (here every one idle: all wait to receive).
  dccl_gpu_test(colls_2ranks_staged_root_mismatch COMMAND ${DCCL_EXPECT_OUTPUT}
                "rank [0-9]+: its kernels' links in host memory: 0 with slots in flight, [1-9][0-9]* idle"
                $<TARGET_FILE:gpu_colls> 2 root_mismatch ENV DCCL_TRANSPORT=shm DCCL_STALL_REPORT_MS=500)
  # ncclCommRevoke while a receive's kernel waits for a send that never comes: the kernel exits and the
  # communicator settles (written 2026-12-05, not yet run on a GPU).
  dccl_gpu_test(colls_2ranks_revoke COMMAND gpu_colls 2 revoke)
  # Ranks of one communicator on one stream: summed in a shared launch, or refused at the call (never a hang); the
  # ring's 4 MiB all-reduce (32 channels a rank) cannot share one launch.
  foreach(n 2 4)
    dccl_gpu_test(colls_${n}ranks_one_stream COMMAND gpu_colls ${n} one_stream)
  endforeach()
  dccl_gpu_test(colls_2ranks_one_stream_ring COMMAND gpu_colls 2 one_stream ENV DCCL_ALGO=ring)
  # LL at every size, in 4 KiB steps (DCCL_PROTO=ll; by default only operations whose steps fit one): rings,
  # chains, trees (the double tree's two streams at once), sends, over p2p and staged links (passed on the H200
  # 2026-12-05; staged_ll hung until d6073ff fixed a race that hangs so, then passed 16 runs of 16).
  foreach(n 2 3)
    dccl_gpu_test(colls_${n}ranks_ll COMMAND gpu_colls ${n} ENV DCCL_PROTO=ll)
    dccl_gpu_test(colls_${n}ranks_ring_ll COMMAND gpu_colls ${n} ENV DCCL_PROTO=ll DCCL_ALGO=ring)
  endforeach()
  dccl_gpu_test(colls_4ranks_tree_ll COMMAND gpu_colls 4 ENV DCCL_PROTO=ll DCCL_ALGO=tree)
  dccl_gpu_test(colls_2ranks_staged_ll COMMAND gpu_colls 2 ENV DCCL_TRANSPORT=shm DCCL_PROTO=ll)
  # The small one-shots on the LL path, as without the tiny path (DCCL_DEV_TINY=0).
  foreach(n 2 3)
    dccl_gpu_test(colls_${n}ranks_oneshot_no_tiny COMMAND gpu_colls ${n} ENV DCCL_ALGO=oneshot DCCL_DEV_TINY=0)
  endforeach()
  # Two pretend hosts on the one GPU (DCCL_HOSTID gives rank r entry r): p2p inside each, device links over
  # sockets between them (FIFOs in pinned host memory, moved by each rank's link pump), every collective, ring and
  # tree; the log says the device links went over the network. Graphs replayed over them drive the pump.
  foreach(algo ring tree)
    dccl_gpu_test(colls_4ranks_two_hosts_${algo} COMMAND ${DCCL_EXPECT_OUTPUT}
                  "device links between hosts go over the network \\(4 channels"
                  $<TARGET_FILE:gpu_colls> 4 ENV DCCL_HOSTID=A,A,B,B DCCL_ALGO=${algo} DCCL_DEBUG=INFO
                  DCCL_DEBUG_SUBSYS=INIT)
  endforeach()
  dccl_gpu_test(colls_3ranks_two_hosts COMMAND gpu_colls 3 ENV DCCL_HOSTID=A,B)
  dccl_gpu_test(graphs_two_hosts COMMAND gpu_graphs ENV DCCL_HOSTID=A,B)
  # Ranks of one process on one GPU take the direct all-reduce by default: the trace says which algorithm ran.
  dccl_gpu_test(colls_2ranks_direct_traced COMMAND ${DCCL_EXPECT_OUTPUT}
                "ncclAllReduce #[0-9]+ count 1048579 type [a-z0-9]+ root -1 peer -1 algo direct"
                $<TARGET_FILE:gpu_colls> 2 ENV DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
  # DCCL_ALGO=direct runs every collective but send/recv directly: the trace says so for the reduce-scatter.
  dccl_gpu_test(colls_3ranks_direct_reducescatter_traced COMMAND ${DCCL_EXPECT_OUTPUT}
                "ncclReduceScatter #[0-9]+ count [0-9]+ type [a-z0-9]+ root -1 peer -1 algo direct"
                $<TARGET_FILE:gpu_colls> 3 ENV DCCL_ALGO=direct DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
  # Deterministic mode on GPU buffers: the direct all-reduce's bits are the rank-order sum's, at 3 and 4 ranks.
  foreach(n 3 4)
    dccl_gpu_test(colls_${n}ranks_deterministic COMMAND gpu_colls ${n} deterministic ENV DCCL_DETERMINISTIC=1)
  endforeach()
  # The direct collectives on few channels a launch (a rank's part walked by few CTAs, and a group's channels folded
  # onto them) instead of the default's many: every collective checked (5 CTAs: the all-to-all's 4 lanes at 3 ranks
  # need a CTA each beside the collectives'), and the deterministic all-reduce's bits on two.
  dccl_gpu_test(colls_3ranks_direct_5ctas COMMAND gpu_colls 3 ENV DCCL_ALGO=direct DCCL_MAX_CTAS=5)
  dccl_gpu_test(colls_4ranks_deterministic_2ctas COMMAND gpu_colls 4 deterministic
                ENV DCCL_DETERMINISTIC=1 DCCL_MAX_CTAS=2)
  # Rank 0 in a FIFO algorithm, the others in the direct one (below and above DCCL_DIRECT_MIN_BYTES), and a broadcast
  # whose ranks name different roots (all wait to receive): no fingerprint meets another, so only the stall report
  # (every 100 ms the monitor notes kernels that make no progress) names them.
  foreach(n 2 4)
    dccl_gpu_test(colls_${n}ranks_path_mismatch COMMAND gpu_colls ${n} path_mismatch
                  ENV DCCL_DIRECT_MIN_BYTES=8192 DCCL_STALL_REPORT_MS=500)
  endforeach()
  dccl_gpu_test(colls_4ranks_memalloc COMMAND gpu_colls 4 memalloc)
  # A small memory limit lowers the channels (the test checks every rank's usage against it).
  dccl_gpu_test(colls_4ranks_memlimit COMMAND gpu_colls 4 ENV DCCL_DEV_MEM_LIMIT=8388608)
  dccl_gpu_test(colls_2ranks_1gib COMMAND gpu_colls 2 big)
  dccl_gpu_test(colls_4ranks_1gib COMMAND gpu_colls 4 big)
  dccl_gpu_test(concurrent_4ranks_2comms COMMAND gpu_concurrent 4 2)
  # A rank process killed while its peers' kernels wait for it (tests/cuda/gpu_peer_death.c).
  add_executable(gpu_peer_death ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_peer_death.c)
  target_link_libraries(gpu_peer_death PRIVATE dccl_fault_harness dccl CUDA::cudart)
  # Files into GPU memory through the bounce (tests/cuda/gpu_file_load.c), default chunks and many small ones.
  add_executable(gpu_file_load ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_file_load.c
                               ${CMAKE_CURRENT_SOURCE_DIR}/cuda/late_writer.cu)
  target_link_libraries(gpu_file_load PRIVATE dccl CUDA::cudart Threads::Threads)
  dccl_gpu_test(file_load COMMAND gpu_file_load)
  dccl_gpu_test(file_load_small_chunks COMMAND gpu_file_load
                ENV DCCL_FILE_CHUNK=65536 DCCL_FILE_THREADS=3)
  # Every chunk with O_DIRECT into GPU memory; and DCCL_FILE_PATH=cufile: cuFile asked about each file, its answer
  # logged (on the H200 its registration was refused with 5027 when measured by hand) before the bounce takes over.
  dccl_gpu_test(file_load_direct COMMAND gpu_file_load ENV DCCL_FILE_PATH=direct DCCL_FILE_CHUNK=65536)
  dccl_gpu_test(file_load_cufile_asked COMMAND ${DCCL_EXPECT_OUTPUT} "cuFile: .* (the bounce|reading through)"
                $<TARGET_FILE:gpu_file_load> ENV DCCL_FILE_PATH=cufile DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=ALL)
  # Reads through cuFile, end to end, against a stand-in libcufile.so.0 (tests/cuda/fake_cufile.c): the H200's own
  # cuFile refuses its files. Every case of gpu_file_load, and the stand-in's count of reads at exit.
  add_library(fake_cufile SHARED ${CMAKE_CURRENT_SOURCE_DIR}/cuda/fake_cufile.c)
  target_include_directories(fake_cufile PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(fake_cufile PRIVATE CUDA::cudart)
  set_target_properties(fake_cufile PROPERTIES OUTPUT_NAME cufile SUFFIX ".so.0"
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_cufile)
  dccl_gpu_test(file_load_cufile_reads COMMAND ${DCCL_EXPECT_OUTPUT} "fake cuFile: [1-9][0-9]* reads"
                $<TARGET_FILE:gpu_file_load> ENV DCCL_FILE_PATH=cufile DCCL_FILE_CHUNK=3145728
                LD_LIBRARY_PATH=$<TARGET_FILE_DIR:fake_cufile>)
  add_executable(gpu_mismatch ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_mismatch.c)
  target_link_libraries(gpu_mismatch PRIVATE dccl_fault_harness dccl CUDA::cudart)
  add_executable(gpu_ce_bits ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_ce_bits.c)
  target_link_libraries(gpu_ce_bits PRIVATE dccl_fault_harness dccl CUDA::cudart)
  add_executable(gpu_windows ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_windows.c)
  target_link_libraries(gpu_windows PRIVATE dccl_fault_harness dccl CUDA::cudart)
  add_executable(gpu_spans ${CMAKE_CURRENT_SOURCE_DIR}/cuda/gpu_spans.c)
  target_link_libraries(gpu_spans PRIVATE dccl_fault_harness dccl CUDA::cudart CUDA::cuda_driver)

  # Ranks in processes of their own (coll_suite --device: every collective, type and reduction at small sizes,
  # checked as on the host), under MPS through mpirun and through the TCP bootstrap (--fork), and a few cases
  # without MPS, where every hand-off between the processes waits for a time slice (correct, slow).
  if(TARGET coll_suite)
    set(mps ${CMAKE_CURRENT_SOURCE_DIR}/cuda/with_mps.sh)
    set(suite $<TARGET_FILE:coll_suite> --device --quick --case-timeout 60)
    if(MPI_C_FOUND)
      set(mpirun ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --bind-to none)
      dccl_gpu_test(suite_mpirun_2ranks_mps COMMAND ${mps} ${mpirun} -np 2 ${suite} ENV DCCL_TIMEOUT=60)
      dccl_gpu_test(suite_mpirun_2ranks_mps_staged COMMAND ${mps} ${mpirun} -np 2 ${suite}
                    ENV DCCL_TIMEOUT=60 DCCL_TRANSPORT=shm)
      dccl_gpu_test(suite_mpirun_4ranks_mps_tree COMMAND ${mps} ${mpirun} -np 4 ${suite} --algo tree
                    --colls allreduce,broadcast,reduce ENV DCCL_TIMEOUT=60)
    endif()
    dccl_gpu_test(suite_fork_3ranks_mps COMMAND ${mps} ${suite} --fork 3 --timeout 270 ENV DCCL_TIMEOUT=60)
    # Buffers outside windows mapped on first use (core/comm_lazy_map.c, DCCL_LAZY_MAP_BYTES=0): every collective on
    # the suite's unregistered cudaMalloc buffers, new ones each case and often at the last case's addresses (rows
    # naming freed allocations must go), more cases than rows (the least recently used are replaced); the trace
    # must show an all-reduce taking the direct algorithm, and the log a first-use mapping.
    dccl_gpu_test(suite_fork_3ranks_mps_lazy COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "ncclAllReduce #[0-9]+ count 65543 type [a-z0-9]+ root -1 peer -1 algo direct"
                  ${DCCL_EXPECT_OUTPUT} "every rank's buffers mapped on first use" ${suite} --fork 3 --timeout 270
                  ENV DCCL_TIMEOUT=60 DCCL_LAZY_MAP_BYTES=0 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    # Device send/recv over several channels (DCCL_DEV_P2P_NCHANNELS=8: one per MiB, a link and a CTA each): both
    # send/recv patterns at sizes of 1, 4 and 8 channels, checked as every case.
    dccl_gpu_test(suite_fork_3ranks_mps_p2p_channels COMMAND ${mps} ${suite} --fork 3 --timeout 270 --colls sendrecv
                  --types float,bfloat16 --sizes 0,7,262145,1048579,4194311 ENV DCCL_TIMEOUT=60 DCCL_DEV_P2P_NCHANNELS=8)
    # Two pretend hosts of processes under MPS, their ranks alternating (A,B,A,B): the ring keeps each host's ranks
    # together and crosses between them twice; sockets carry the device links between them.
    dccl_gpu_test(suite_fork_4ranks_mps_two_hosts COMMAND ${mps} ${DCCL_EXPECT_OUTPUT} "host crossings 2\\)"
                  ${suite} --fork 4 --timeout 270 ENV DCCL_TIMEOUT=60 DCCL_HOSTID=A,B,A,B
                  DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=INIT)
    dccl_gpu_test(suite_fork_4ranks_mps_two_hosts_tree COMMAND ${mps} ${suite} --fork 4 --timeout 270 --algo tree
                  ENV DCCL_TIMEOUT=60 DCCL_HOSTID=A,B,A,B)
    # Windows between processes: the direct all-reduce reading the other processes' buffers in place
    # (tests/cuda/gpu_windows.c), cudaMalloc and ncclMemAlloc memory.
    set(windows $<TARGET_FILE:gpu_windows>)
    dccl_gpu_test(windows_2ranks_cudamalloc COMMAND ${mps} ${windows} 2 cudamalloc ENV DCCL_TIMEOUT=60)
    dccl_gpu_test(windows_4ranks_memalloc COMMAND ${mps} ${windows} 4 memalloc ENV DCCL_TIMEOUT=60)
    dccl_gpu_test(windows_3ranks_cudamalloc_direct COMMAND ${mps} ${windows} 3 cudamalloc
                  ENV DCCL_TIMEOUT=60 DCCL_ALGO=direct)
    # Deterministic mode: the window call must take the direct all-reduce (the trace says so).
    set(direct_traced ${DCCL_EXPECT_OUTPUT} "ncclAllReduce #[0-9]+ count 100003 type [a-z0-9]+ root -1 peer -1 algo direct")
    dccl_gpu_test(windows_3ranks_cudamalloc_deterministic COMMAND ${mps} ${direct_traced} ${windows} 3 cudamalloc
                  deterministic ENV DCCL_TIMEOUT=60 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    dccl_gpu_test(windows_2ranks_memalloc_deterministic COMMAND ${mps} ${direct_traced} ${windows} 2 memalloc
                  deterministic ENV DCCL_TIMEOUT=60 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    # Windows over allocations mapped on first use and the reverse: no second open of one allocation.
    dccl_gpu_test(windows_3ranks_cudamalloc_lazy COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "every rank's buffers mapped on first use" ${windows} 3 cudamalloc lazy
                  ENV DCCL_TIMEOUT=60 DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=COLL)
    # The same on ncclMemAlloc (cuMem) memory: the meeting passes each new allocation's descriptor to every rank.
    dccl_gpu_test(windows_3ranks_memalloc_lazy COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "every rank's buffers mapped on first use" ${windows} 3 memalloc lazy
                  ENV DCCL_TIMEOUT=60 DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=COLL)
    # Without MPS the kernels' waits (DCCL_CE=0: the all-reduce in kernels, as with MPS).
    dccl_gpu_test(peer_death_mid_no_mps COMMAND ${mps} --off $<TARGET_FILE:gpu_peer_death> mid ENV DCCL_CE=0)
    dccl_gpu_test(peer_death_idle_no_mps COMMAND ${mps} --off $<TARGET_FILE:gpu_peer_death> idle ENV DCCL_CE=0)
    dccl_gpu_test(peer_death_idle_mps COMMAND ${mps} $<TARGET_FILE:gpu_peer_death> idle)
    dccl_gpu_test(peer_death_meeting_mps COMMAND ${mps} $<TARGET_FILE:gpu_peer_death> meeting)
    # Creation measures whether the processes' kernels run at once (src/core/gpu_sharing_probe.c): a WARN with the
    # figure without MPS, an INFO line with a small one under it.
    set(one_case --colls allreduce --types float --sizes 1 --placement out)
    dccl_gpu_test(sharing_probe_warns_no_mps COMMAND ${mps} --off ${DCCL_EXPECT_OUTPUT}
                  "do not run their kernels at once: a 4-byte device all-reduce took [0-9]+ us"
                  ${suite} --fork 2 ${one_case} ENV DCCL_DEBUG=WARN)
    dccl_gpu_test(sharing_probe_quiet_mps COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "rank 1: ranks of different processes share a GPU. a 4-byte device all-reduce took [0-9.]+ us \\(median of 4\\)$"
                  ${suite} --fork 2 ${one_case} ENV DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=INIT)
    # PyTorch DDP on the drop-in libnccl.so.2 (tests/dropin/torch_ddp.py), 2 and 4 ranks on the GPU under MPS.
    foreach(n 2 4)
      dccl_gpu_test(torch_ddp_${n}ranks_mps COMMAND ${mps} bash ${PROJECT_SOURCE_DIR}/tests/dropin/torch_ddp.sh
                    $<TARGET_FILE:nccl_dropin> ${n})
    endforeach()
    # Tensors from a PyTorch memory pool over ncclMemAlloc (cuMem segments) mapped on first use by the ranks'
    # meeting.
    dccl_gpu_test(torch_mempool_2ranks_mps COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "every rank's buffers mapped on first use" bash ${PROJECT_SOURCE_DIR}/tests/dropin/torch_ddp.sh
                  $<TARGET_FILE:nccl_dropin> 2 --mempool $<TARGET_FILE:torch_nccl_pool>
                  ENV DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=COLL)
    # Buffers across several cuMem allocations of one reserved range (an expandable segment made by hand), mapped
    # on first use as spans: parts shared, replaced in place, mapped later; 2 and 3 ranks.
    foreach(n 2 3)
      dccl_gpu_test(spans_${n}ranks_mps COMMAND ${mps} ${DCCL_EXPECT_OUTPUT} "every rank's buffers mapped on first use"
                    $<TARGET_FILE:gpu_spans> ${n} ENV DCCL_TIMEOUT=60 DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=COLL)
    endforeach()
    # Tensors in PyTorch's expandable segments (several cuMem allocations end to end in one reserved range), mapped
    # on first use as spans (src/core/lazy_spans.c): every result right; rank 0 prints the driver's view of each
    # tensor's memory.
    dccl_gpu_test(torch_expandable_2ranks_mps COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "every rank's buffers mapped on first use" bash ${PROJECT_SOURCE_DIR}/tests/dropin/torch_ddp.sh
                  $<TARGET_FILE:nccl_dropin> 2 --expandable
                  ENV PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=COLL)
    # PyTorch registering every caching-allocator segment (ncclCommRegister on every rank): with the size threshold
    # out of reach, only registration can make the ranks meet and map; every check of torch_ddp.py must still pass.
    dccl_gpu_test(torch_registered_2ranks_mps COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "every rank's buffers mapped on first use" bash ${PROJECT_SOURCE_DIR}/tests/dropin/torch_ddp.sh
                  $<TARGET_FILE:nccl_dropin> 2 ENV TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1
                  DCCL_LAZY_MAP_BYTES=1073741824 DCCL_DEBUG=INFO DCCL_DEBUG_SUBSYS=COLL)
    # PyTorch's nonblocking mode polls ncclCommGetAsyncError while the creation builds the device side.
    dccl_gpu_test(torch_ddp_2ranks_mps_nonblocking COMMAND ${mps} bash ${PROJECT_SOURCE_DIR}/tests/dropin/torch_ddp.sh
                  $<TARGET_FILE:nccl_dropin> 2 ENV TORCH_NCCL_USE_COMM_NONBLOCKING=1)
    # The copy-engine collectives (collectives/device/ce_collectives.h, DCCL_CE): taken by default without MPS, where
    # creation measures that the processes' kernels take turns (the trace must show the path), and not under MPS;
    # checked like any: every reduction (premulsum takes the kernels, in the same communicator), 4 KiB pieces so
    # the larger sizes run many rounds through both halves of every slot; the other collectives, in place and out;
    # under MPS when asked (DCCL_CE=1), 3 ranks, and 4 ranks with the default pieces up to 64 MiB; a rank killed
    # while the others' streams wait for its flags (abort raises their own flags, so the streams go on).
    set(ce_cases --colls allreduce --types float,bfloat16,int32,f8e5m2 --sizes 1,7,1000,65543)
    dccl_gpu_test(suite_fork_2ranks_no_mps_ce COMMAND ${mps} --off ${DCCL_EXPECT_OUTPUT}
                  "ncclAllReduce #[0-9]+ count 65543 type [a-z0-9]+ root -1 peer -1 algo ce"
                  ${suite} --fork 2 --timeout 270 ${ce_cases}
                  ENV DCCL_TIMEOUT=60 DCCL_CE_CHUNK=4096 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    dccl_gpu_test(suite_fork_2ranks_no_mps_ce_others COMMAND ${mps} --off ${DCCL_EXPECT_OUTPUT}
                  "ncclReduceScatter #[0-9]+ count 65543 type [a-z0-9]+ root -1 peer -1 algo ce"
                  ${DCCL_EXPECT_OUTPUT} "ncclBroadcast #[0-9]+ count 65543 type [a-z0-9]+ root 1 peer -1 algo ce"
                  ${suite} --fork 2 --timeout 270 --colls reducescatter,reduce,allgather,broadcast
                  --types float,bfloat16,int32 --sizes 1,7,65543
                  ENV DCCL_TIMEOUT=60 DCCL_CE_CHUNK=4096 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    dccl_gpu_test(suite_fork_2ranks_mps_no_ce COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                  "ncclAllReduce #[0-9]+ count 65543 type [a-z0-9]+ root -1 peer -1 algo (ring|oneshot|direct)"
                  ${suite} --fork 2 --timeout 270 --colls allreduce --types float --ops sum --sizes 65543
                  ENV DCCL_TIMEOUT=60 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    dccl_gpu_test(suite_fork_3ranks_mps_ce COMMAND ${mps} ${suite} --fork 3 --timeout 270
                  --colls allreduce,broadcast,reduce,allgather,reducescatter ENV DCCL_TIMEOUT=60 DCCL_CE=1
                  DCCL_CE_CHUNK=4096)
    dccl_gpu_test(suite_fork_4ranks_mps_ce_big COMMAND ${mps} ${suite} --fork 4 --timeout 270
                  --colls allreduce,reducescatter,allgather --types float,bfloat16 --ops sum,avg
                  --sizes 1048579,16777259 ENV DCCL_TIMEOUT=60 DCCL_CE=1)
    dccl_gpu_test(peer_death_mid_no_mps_ce COMMAND ${mps} --off $<TARGET_FILE:gpu_peer_death> mid)
    # Ranks calling the copy engines with different counts, or a broadcast with different roots: both name the
    # mismatch (tests/cuda/gpu_mismatch.c).
    foreach(what count root)
      dccl_gpu_test(ce_mismatch_${what}_no_mps COMMAND ${mps} --off $<TARGET_FILE:gpu_mismatch> ${what} ENV DCCL_CE=1)
    endforeach()
    # Send/recv by copy engines (DCCL_CE_P2P=1): both patterns of the suite (pairs, a ring) at sizes of one piece
    # and of several (4 KiB pieces), without MPS and with it (DCCL_CE=1); the trace must show a send taking them
    # (written 2026-12-03 after the session's device time: not yet run on a GPU).
    dccl_gpu_test(suite_fork_3ranks_no_mps_ce_sendrecv COMMAND ${mps} --off ${DCCL_EXPECT_OUTPUT}
                  "ncclSend #[0-9]+ count 65543 type [a-z0-9]+ root -1 peer [0-9] algo ce"
                  ${suite} --fork 3 --timeout 270 --colls sendrecv --types float,int8 --sizes 1,4096,65543
                  ENV DCCL_TIMEOUT=60 DCCL_CE_P2P=1 DCCL_CE_CHUNK=4096 DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    dccl_gpu_test(suite_fork_4ranks_mps_ce_sendrecv COMMAND ${mps} ${suite} --fork 4 --timeout 270 --colls sendrecv
                  --types float,bfloat16 --sizes 7,1048579 ENV DCCL_TIMEOUT=60 DCCL_CE=1 DCCL_CE_P2P=1)
    # One rank's host call waiting in the first-use mapping's meeting, the other's kernel waiting for it, with
    # different counts: the stall report sees both and fails them.
    dccl_gpu_test(meeting_mismatch_mps COMMAND ${mps} $<TARGET_FILE:gpu_mismatch> meeting
                  ENV DCCL_STALL_REPORT_MS=1000)
    # Registered buffers meet at any size: a small all-reduce on both ranks' registered buffers is summed; then one
    # rank passes unregistered ones (against NCCL's rule) and the stall report names it on both.
    dccl_gpu_test(registered_mismatch_mps COMMAND ${mps} $<TARGET_FILE:gpu_mismatch> registered
                  ENV DCCL_STALL_REPORT_MS=1000)
    # Counts on either side of the LL step (1000 and 1100 floats): one rank's kernel sends and polls LL, the other's
    # bulk; each sees the other's slot and names the mismatch (written 2026-12-05, not yet run on a GPU).
    dccl_gpu_test(protocol_mismatch_mps COMMAND ${mps} $<TARGET_FILE:gpu_mismatch> protocols)
    # A receive of 1000 floats against a send of 500, both LL: the receiver's pollers of lines never written must
    # read the header's count and stop; the receiver names both sizes within 10 s (not yet run on a GPU).
    dccl_gpu_test(ll_short_send_mps COMMAND ${mps} $<TARGET_FILE:gpu_mismatch> sends)
    # The LL kernels' tiny path (dev_tiny.cuh) against itself, the LL path and bulk, calls that differ.
    foreach(case tiny tinyll tinybulk)
      dccl_gpu_test(${case}_mismatch_mps COMMAND ${mps} $<TARGET_FILE:gpu_mismatch> ${case})
    endforeach()
    # Deterministic mode's bits on the copy engines: the rank-order sum's, whatever the pieces (tests/cuda/gpu_ce_bits.c);
    # the trace shows the copy engines took the calls.
    dccl_gpu_test(ce_bits_no_mps COMMAND ${mps} --off ${DCCL_EXPECT_OUTPUT}
                  "ncclReduceScatter #[0-9]+ count 33335 type [a-z0-9]+ root -1 peer -1 algo ce"
                  $<TARGET_FILE:gpu_ce_bits> ENV DCCL_CE=1 DCCL_DETERMINISTIC=1 DCCL_CE_CHUNK=4096
                  DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    # The same bits from kernels over device links, under MPS with buffers outside windows and nothing mapped on
    # first use (no direct all-reduce): the one-shot and ordered schedules, over p2p FIFOs and staged through host
    # memory; the trace shows the ordered schedule took them (written 2026-12-05, not yet run on a GPU).
    foreach(transport p2p shm)
      dccl_gpu_test(det_bits_mps_${transport} COMMAND ${mps} ${DCCL_EXPECT_OUTPUT}
                    "ncclReduceScatter #[0-9]+ count 33335 type [a-z0-9]+ root -1 peer -1 algo ordered"
                    $<TARGET_FILE:gpu_ce_bits> ENV DCCL_DETERMINISTIC=1 DCCL_LAZY_MAP_BYTES=-1
                    DCCL_TRANSPORT=$<$<STREQUAL:${transport},shm>:shm> DCCL_DEBUG=TRACE DCCL_DEBUG_SUBSYS=COLL)
    endforeach()
    # A piece of 1 GiB asked under a 24 MiB limit: the region must shrink to fit beside the device links.
    dccl_gpu_test(ce_bits_no_mps_memlimit COMMAND ${mps} --off $<TARGET_FILE:gpu_ce_bits>
                  ENV DCCL_CE=1 DCCL_DETERMINISTIC=1 DCCL_CE_CHUNK=1073741824 DCCL_DEV_MEM_LIMIT=25165824)
    dccl_gpu_test(suite_fork_2ranks_no_mps COMMAND ${mps} --off ${suite} --fork 2 --timeout 270 --types float,bfloat16
                  --sizes 1,1000 --colls allreduce,broadcast,sendrecv ENV DCCL_TIMEOUT=60 DCCL_CE=0)
  endif()
endif()
