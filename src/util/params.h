/* Every environment parameter, in one table. DCCL_<NAME> is read first, then NCCL_<NAME>; each is read once.
 * A forked child reads its environment again. docs/env.md is generated from this table (tools/gen_env_doc), and a
 * test checks the two agree. */
#ifndef DCCL_PARAMS_H_
#define DCCL_PARAMS_H_

#include <stdint.h>

/* X(NAME, kind, default, "meaning"): kind is INT or STR; the default of an INT is a number, of a STR a string. */
#define DCCL_PARAM_TABLE(X)                                                                                        \
  X(DEBUG, STR, "WARN", "Log level: NONE, WARN, INFO or TRACE.")                                                   \
  X(DEBUG_SUBSYS, STR, "ALL", "Comma-separated subsystems to log: INIT, COLL, P2P, SHM, NET, BOOTSTRAP, TUNE, "  \
                               "ENV or ALL.")                                                                       \
  X(DEBUG_FILE, STR, "", "Write the log to this file instead of stderr (%h host, %p pid).")                       \
  X(SOCKET_IFNAME, STR, "", "Network interface for the bootstrap and sockets: a name or prefix (`eth`, `^docker` " \
                            "excludes, `=eth0` exact). Empty: chosen automatically.")                              \
  X(SOCKET_FAMILY, STR, "", "Address family: AF_INET or AF_INET6. Empty: either.")                                 \
  X(SOCKET_NSTREAMS, INT, 2, "TCP streams per socket connection; data is striped across them.")                    \
  X(HOSTID, STR, "", "Overrides this process's host identity (default: hostname + boot id). Ranks with different " \
                     "ids are treated as different hosts. A comma-separated list (`A,A,B,B`) gives rank r entry r " \
                     "(the last for ranks past it): pretend hosts among the ranks of one process.")              \
  X(TRANSPORT, STR, "", "Forces one transport for every pair of ranks: `shm`, `ib` or `socket`. Empty: shm "     \
                        "within a host; between hosts net_ib where both have an active RDMA port, else sockets. "  \
                        "Device buffers: `shm` (or `staged`) stages them through pinned shared host memory (no "  \
                        "rank maps another's GPU memory: no direct algorithms), "                                 \
                        "`p2p` maps GPU memory, `socket` sends them over TCP (unless DCCL_DEV_NET=0); empty: p2p " \
                        "between ranks on one GPU, else staged within a host, else net_ib or sockets.")         \
  X(IB_HCA, STR, "", "RDMA devices net_ib may use: comma-separated names with optional `:port`, matched as "      \
                     "prefixes (`=mlx5_0` exact, a leading `^` excludes). Of the active ports that pass, those "   \
                     "nearest the GPU (or the CPUs) in hwloc's tree are used, lane L on the L mod n-th.")       \
  X(IB_GID_INDEX, INT, -1, "RoCE GID index to use (-1: the RoCEv2 GID of the address that routes to the peer).")  \
  X(IB_QPS_PER_CONN, INT, 1, "Queue pairs per net_ib connection (1..8); slots are striped across them.")          \
  X(IB_TIMEOUT, INT, 14, "net_ib ack timeout exponent: 4.096 us * 2^value per retry.")                            \
  X(IB_RETRY_CNT, INT, 7, "net_ib retries before a write fails with `transport retry counter exceeded`.")          \
  X(ALGO, STR, "", "Forces an algorithm: `ring`, `tree` or `oneshot` (all-reduce), or `direct` (device "       \
                   "collectives between ranks of one GPU reading each other's buffers: one process, or windows; "   \
                   "elsewhere as empty). Empty: the cost model " \
                   "chooses per call. Creation makes the links of the algorithms that may run (`tree`: also the "  \
                   "broadcast/reduce tree of every root).")                                                        \
  X(RUNTIME_CONNECT, INT, 1, "1: point-to-point links are made by the first ncclSend/ncclRecv between two ranks "  \
                             "(or by dcclCommConnectPeers); 0: every rank's links to every other are made at "   \
                             "creation, so no call makes one, also inside CUDA stream capture.")                 \
  X(PROTO, STR, "", "Forces a protocol: `ll` (flags stored with the data, for small messages) or `bulk` (payload, " \
                    "then a counter). Empty: the cost model chooses per call. LL applies where a link carries it " \
                    "(shm) and a step fits an LL slot (4 KiB). Kernels speak LL in sends, receives and one-shot " \
                    "all-reduces whose steps fit 4 KiB (not over network links); `ll` makes every operation use " \
                    "it, at every size in 4 KiB steps, `bulk` none.")                                                        \
  X(STALL_REPORT_MS, INT, 10000, "A wait with no progress for this long asks every rank what it is doing (over " \
                                  "the bootstrap): rank 0 logs one report, and ranks found in the same collective " \
                                  "with different calls fail with ncclInvalidUsage; 0: never.")                \
  X(CHECK, INT, 1, "1: every slot carries its sender's call (count, datatype, reduction, root; a send its bytes) and "  \
                   "the receiver compares it with its own, failing mismatched calls with a message naming both; 0: " \
                   "no compare.")                                                                                  \
  X(NCHANNELS, INT, 1, "Channels (independent rings/trees, each with its own connections) per collective.")      \
  X(CHUNK_SIZE, INT, 262144, "Bytes per FIFO slot: the pipelining unit of every algorithm.")                       \
  X(STREAM_BYTES, INT, 4194304, "Outputs of at least this many bytes per rank are written with non-temporal "    \
    "(cache-bypassing) stores; -1: never.")                                                                          \
  X(NSLOTS, INT, 8, "Slots in each connection's FIFO.")                                                            \
  X(DEV_NCHANNELS, INT, 64, "Channels of a device-buffer collective: one CTA of the kernel each (at most the "   \
                             "GPU's resident CTAs over the ranks sharing it).")                                     \
  X(FILE_THREADS, INT, 8, "Threads reading one file load (dcclFileLoad) in parallel (1..64).")                  \
  X(FILE_CHUNK, INT, 4194304, "Bytes each file-load thread reads per request (at least 4096).")                    \
  X(FILE_PATH, STR, "", "How a file load moves its bytes: empty (host memory: pread straight into it; GPU memory: "  \
                        "`auto`), `bounce` (pread into two pinned staging buffers per thread, "                  \
                        "copied on from there; host destinations too), `auto` (the bounce, chunks mostly not in "  \
                        "the page cache read with O_DIRECT), `direct` (the bounce, every chunk read with "         \
                        "O_DIRECT; buffered where the file system refuses it), `cufile` (GPU memory: read through "\
                        "cuFile where it registers the file, its compat mode included, else `auto`). Unset or "  \
                        "`auto` asks cuFile first only where nvidia-fs is loaded.")                               \
  X(DIRECT_MIN_BYTES, INT, 0, "Device collectives of at least this many bytes between ranks of one GPU (of one "  \
                              "process, or with buffers in windows) read every rank's buffers in place (the direct " \
                              "algorithm); smaller ones take the one-shot (all-reduce) or the ring. All-reduces of " \
                              "at most 2 KiB take the one-shot whatever it says (faster there), unless DCCL_PROTO="  \
                              "bulk. -1: never (unless DCCL_ALGO=direct).")                                         \
  X(LAZY_MAP_BYTES, INT, 262144, "Device collectives whose larger buffer (an all-gather's output, a "            \
                                "reduce-scatter's input) holds at least this many bytes (of any size where both "\
                                "buffers are registered with ncclCommRegister) between ranks that live one "   \
                                "per process on one GPU map every rank's buffers outside windows on first use " \
                                "(the ranks meet at each such call, on a shared-memory board: the host call "   \
                                "waits for every rank's), so the direct algorithms read them in place; "        \
                                "cudaMalloc memory and single cuMem allocations (ncclMemAlloc), not while "     \
                                "capturing. -1: never (buffers outside windows take the FIFO algorithms).")    \
  X(CE, INT, -1, "Device collectives (all but send/recv) of 2 to 8 ranks on one GPU, each in a process of its "  \
                 "own, by copy engines between IPC-mapped buffers, ordered by stream waits on flags, with short "  \
                 "kernels that only combine or copy: nothing spins, so without MPS no rank's kernel holds the GPU " \
                 "from the others. -1: where creation measures that the processes' kernels take turns (no MPS); "  \
                 "1: always; 0: never. Uncaptured calls only (captured ones take the kernels).")                  \
  X(CE_P2P, INT, 1, "1: device send/recv of communicators whose collectives take the copy engines (DCCL_CE) take "  \
                    "them too: chunk by chunk through the receiver's inbox in GPU memory (2 x ranks more pieces of "  \
                    "DCCL_CE_CHUNK a rank), ordered by stream waits on flags, a short kernel copying each out "      \
                    "(without MPS: 2x to 10x the kernels' speed); 0: kernels on the p2p links. Taken where every "   \
                    "rank sets it.")                                                                                 \
  X(CE_CHUNK, INT, 2097152, "Copy-engine collectives (DCCL_CE): bytes of one rank's piece moved per round (an "   \
                            "all-reduce moves ranks of them, a broadcast 2 x ranks); each rank holds 4 x ranks of " \
                            "them in GPU memory, lowered to fit what DCCL_DEV_MEM_LIMIT leaves after the device "  \
                            "links.")                                                                              \
  X(DETERMINISTIC, INT, 0, "1: every reduction (all-reduce, reduce, reduce-scatter) combines each element's values " \
    "in rank order at one rank, so the result has the same bits whatever the algorithm, channels, chunk size, "      \
    "transports or placement (at most 9 ranks; GPU buffers only on the direct and copy-engine paths). Every "  \
    "rank must set the same.")               \
  X(MAX_CTAS, INT, 0, "The CTAs each device launch uses; 0: the GPU's resident CTAs over the rank kernels that "   \
                      "may run at once there (every rank on the GPU of every live communicator of the process, "    \
                      "other processes assumed alike). Channels beyond it share CTAs.")                             \
  X(DEV_SHARED_LAUNCH, INT, 1, "1: the device operations of several ranks of this process on one GPU, called "   \
                               "in one group (ncclCommInitAll's ranks driven by one thread), run as one kernel "   \
                               "launch on the first rank's stream, the others' streams ordered before and after "  \
                               "it by events, so no rank's CTAs wait a launch call for their peers'. 0: a launch " \
                               "per rank.")                                                                        \
  X(DEV_TINY, INT, 1, "1: a launch of small one-shot all-reduces (at most 128 bytes each, one per CTA) runs "     \
                      "them on the tiny kernels, one warp each with none of the LL kernels' machinery. 0: the LL "  \
                      "kernels.")                                                                                 \
  X(DEV_CHUNK_SIZE, INT, 262144, "Bytes per slot of a device link's FIFO (in GPU memory).")                         \
  X(DEV_NSLOTS, INT, 4, "Slots in each device link's FIFO.")                                                        \
  X(DEV_P2P_NCHANNELS, INT, 1, "Most channels of a device send/recv (each a link of its own and a CTA of the "    \
                                "kernel; one per MiB moved, 1 to 64, and no more than let an all-to-all's "      \
                                "2 (n - 1) lanes a channel fit the device channels); 1: one, as before (8 checked " \
                                "on a GPU at 3 ranks; their speed not yet measured).")                            \
  X(DEV_NET, INT, 1, "1: device buffers between hosts (and pretend hosts, DCCL_HOSTID) move over net_ib or "     \
                     "sockets: kernels fill and drain FIFOs in pinned host memory, a proxy thread per rank moves " \
                     "them. 0: such device buffers are refused with ncclInvalidUsage naming the ranks.")          \
  X(DEV_NET_NCHANNELS, INT, 4, "Channels of a device-buffer collective whose device links include network ones "  \
                                "(FIFOs in pinned host memory, moved by a proxy thread per rank).")               \
  X(DEV_NET_POLL_US, INT, 50, "Microseconds a rank's proxy thread for device links over the network sleeps at "   \
                              "most while sends wait for room and once a CUDA graph holds some of its "          \
                              "communicator's work (else a launch wakes it): the longest a replayed graph's "    \
                              "kernels wait for it to look.")                                                   \
  X(DEV_MEM_LIMIT, INT, 67108864, "Bytes of GPU memory one rank's device links of one communicator may hold: the " \
    "device channels are lowered until they fit.")                                                               \
  X(DEV_FENCE, STR, "auto", "Ordering of a device link's counters: `auto` (GPU scope between kernels on one GPU, "  \
    "system scope otherwise) or `system` (always system scope; for measuring what the narrower scope saves).")   \
  X(SPIN_NS, INT, 20000, "Nanoseconds a wait spins before it starts yielding the core (no spinning when a host "  \
                         "has more ranks than processing units).")                                                 \
  X(YIELD_NS, INT, 200000, "Nanoseconds a wait yields before it starts sleeping.")                                 \
  X(TIMEOUT, INT, 0, "Seconds an operation may go without progress before it fails (0: wait forever; a dead "     \
                     "peer is detected regardless).")                                                              \
  X(BOOTSTRAP_TIMEOUT, INT, 300, "Seconds communicator creation waits for the other ranks.")                       \
  X(TUNE_ALPHA_NS, INT, 0, "Overrides the measured per-step latency of the cost model (ns; 0: measure).")          \
  X(TUNE_BW_MBPS, INT, 0, "Overrides the measured copy bandwidth of the cost model (MB/s; 0: measure).")        \
  X(NET_GDR, STR, "auto", "GPUDirect RDMA decision of net_ib, made and logged when it opens its device: `auto` "  \
                          "picks it where the GPU driver and the NIC support it (dma-buf, else nvidia-peermem), `0` " \
                          "never, `1` requires it (a WARN names what is missing). Only the decision exists today: " \
                          "device buffers are not carried between hosts yet.")

enum dccl_param_id {
#define DCCL_PARAM_ENUM(name, kind, def, doc) DCCL_PARAM_##name,
  DCCL_PARAM_TABLE(DCCL_PARAM_ENUM)
#undef DCCL_PARAM_ENUM
      DCCL_PARAM_COUNT
};

int64_t dccl_param_int(enum dccl_param_id id);
const char *dccl_param_str(enum dccl_param_id id);
/* For the doc generator: the table itself. */
struct dccl_param_desc {
  const char *name, *kind, *def, *doc;
};
const struct dccl_param_desc *dccl_param_table(int *count);

#endif
