/* The device executor's host side: a communicator's GPU state (kernels loaded, abort word and status the kernels
 * share with the host, launch work in pinned memory) and the launch of a group's device operations on the user's
 * stream. Without the CUDA toolkit at build time these say that device buffers are not supported. */
#ifndef DCCL_DEV_EXEC_H_
#define DCCL_DEV_EXEC_H_

#include <stddef.h>
#include <string.h>

#include "collectives/device/dev_work.h"
#include "collectives/op.h"
#include "util/cuda_peer_mem.h"

struct dccl_dev_comm;

#ifdef DCCL_HAVE_DEVICE_CODE
/* Sets up comm->dev for the GPU whose primary context is `cu_ctx` (loads the kernels once per device; nothing
 * here synchronises the device). `ranks_on_gpu`: the most ranks of the communicator on one GPU, which share its
 * CTAs; comm->dev_nchannels is lowered to what each may use. */
ncclResult_t dccl_dev_comm_create(struct dccl_coll_comm *comm, void *cu_ctx, int ordinal, int ranks_on_gpu);
/* How a peer maps this rank's direct board (struct dccl_direct_slot per channel, GPU memory). */
ncclResult_t dccl_dev_comm_board_export(const struct dccl_coll_comm *comm, struct dccl_peer_mem_export *e);
/* Every rank's board (exports[r], from process pids[r]; those of other processes are mapped here): the direct
 * all-reduce may run (comm->direct_ok). Called at creation when every rank's GPU side is on this GPU. */
ncclResult_t dccl_dev_comm_set_boards(struct dccl_coll_comm *comm, const struct dccl_peer_mem_export *exports,
                                      const int32_t *pids);
/* Window `index` of every rank, as this process reaches it (row[r]), for the direct kernels. */
ncclResult_t dccl_dev_comm_set_window(struct dccl_coll_comm *comm, int index, const struct dccl_win_peer *row);
/* Memory this state holds: device (the rings' orders) and pinned host (launch work, status words). */
void dccl_dev_comm_memory(const struct dccl_coll_comm *comm, uint64_t *device_bytes, uint64_t *pinned_bytes);
/* Waits for the communicator's launched kernels (not for captured ones: graphs may replay them later), then frees. */
void dccl_dev_comm_free(struct dccl_coll_comm *comm);
/* Makes every running and future kernel of the communicator stop waiting (abort). */
void dccl_dev_comm_abort(struct dccl_coll_comm *comm);
/* A failure a kernel reported, as ncclRemoteError/ncclInvalidUsage with the reason in `text`; ncclSuccess if none. */
ncclResult_t dccl_dev_comm_error(struct dccl_coll_comm *comm, char *text, size_t len);
/* 1 when kernels of the communicator may still run (launched, not seen finished). */
int dccl_dev_comm_busy(struct dccl_coll_comm *comm);
/* 1 when an uncaptured launch of the communicator has not finished: its first operation's call in `call`, and in
 * `idle_ns` how long no kernel of the communicator has finished (or since that launch, if later). */
int dccl_dev_comm_stalled(struct dccl_coll_comm *comm, struct dccl_slot_header *call, int64_t *idle_ns);
/* 1 once a launch of the communicator was captured into a CUDA graph (the calling thread's launches). */
int dccl_dev_comm_captured(const struct dccl_coll_comm *comm);
/* The copy-engine collectives (ce_collectives.h), set up at creation (core/copy_engine_setup.c): possible for 2 to
 * DCCL_CE_MAX_RANKS ranks all on this GPU, each in a process of its own (every rank answers alike); this rank's region
 * for pieces of `chunk` bytes allocated and exported (with the point-to-point inbox where `p2p`: every rank agreed);
 * every rank's mapped (exports[r] from process pids[r]). */
int dccl_dev_ce_possible(const struct dccl_coll_comm *comm);
size_t dccl_dev_ce_chunk(void); /* the piece size this rank asks for (DCCL_CE_CHUNK) */
ncclResult_t dccl_dev_ce_export(struct dccl_coll_comm *comm, size_t chunk, int p2p, struct dccl_peer_mem_export *e);
ncclResult_t dccl_dev_ce_connect(struct dccl_coll_comm *comm, size_t chunk, int p2p,
                                 const struct dccl_peer_mem_export *exports, const int32_t *pids);
/* 1 when `op` (device buffers) runs on the copy engines (ce_collectives.h): a collective they run (all but
 * send/recv, which DCCL_CE_P2P adds), not empty, not being captured, without a per-rank premultiply or a scalar in
 * GPU memory. */
int dccl_dev_ce_takes(const struct dccl_coll_comm *comm, const struct dccl_op *op);
/* 1 when the communicator's collectives take the copy engines (the same on every rank). */
int dccl_dev_ce_on(const struct dccl_coll_comm *comm);
/* The device's copy of a reduction (its premultiplier by value, or the GPU address it is read from). */
struct dccl_dev_redop dccl_dev_redop_of(const struct dccl_redop *r);
/* Waits until none may (host operations and finalize wait for the communicator's device work). */
void dccl_dev_comm_wait(struct dccl_coll_comm *comm);
/* Launches the device ops of the list that belong to `comm` (linked by next, bound, in issue order) as one kernel
 * on `stream`. Returns at once. */
ncclResult_t dccl_dev_launch(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream);
/* Launches the device ops of the list for each of comms[0..n), rank i's on streams[i]: one kernel for them all
 * where they are ranks of this process on one GPU and their work fits one launch (launch_merge.h,
 * DCCL_DEV_SHARED_LAUNCH), else one each. Returns at once. */
ncclResult_t dccl_dev_launch_ranks(struct dccl_coll_comm *const *comms, void *const *streams, int n,
                                   struct dccl_op *list);
/* Copies device memory on `stream` (a send to oneself). */
ncclResult_t dccl_dev_copy(struct dccl_coll_comm *comm, void *dst, const void *src, size_t bytes, void *stream);
/* Times `n` rounds of device work: each calls issue(arg, stream, scratch) on a stream of its own (scratch: 64
 * device-visible bytes of pinned memory) and waits for the stream; us[i] gets round i's wall time. */
ncclResult_t dccl_dev_time_rounds(struct dccl_coll_comm *comm, int n,
                                  ncclResult_t (*issue)(void *arg, void *stream, void *scratch), void *arg, double *us);
#else
static inline ncclResult_t dccl_dev_comm_create(struct dccl_coll_comm *comm, void *cu_ctx, int ordinal, int ranks) {
  (void)comm, (void)cu_ctx, (void)ordinal, (void)ranks;
  return ncclSuccess;
}
static inline ncclResult_t dccl_dev_comm_board_export(const struct dccl_coll_comm *comm,
                                                      struct dccl_peer_mem_export *e) {
  (void)comm;
  memset(e, 0, sizeof(*e));
  return ncclSuccess;
}
static inline ncclResult_t dccl_dev_comm_set_boards(struct dccl_coll_comm *comm,
                                                    const struct dccl_peer_mem_export *exports, const int32_t *pids) {
  (void)comm, (void)exports, (void)pids;
  return ncclInvalidUsage;
}
static inline ncclResult_t dccl_dev_comm_set_window(struct dccl_coll_comm *comm, int index,
                                                    const struct dccl_win_peer *row) {
  (void)comm, (void)index, (void)row;
  return ncclInvalidUsage;
}
static inline void dccl_dev_comm_memory(const struct dccl_coll_comm *comm, uint64_t *device_bytes,
                                        uint64_t *pinned_bytes) {
  (void)comm;
  *device_bytes = *pinned_bytes = 0;
}
static inline void dccl_dev_comm_free(struct dccl_coll_comm *comm) { (void)comm; }
static inline void dccl_dev_comm_abort(struct dccl_coll_comm *comm) { (void)comm; }
static inline ncclResult_t dccl_dev_comm_error(struct dccl_coll_comm *comm, char *text, size_t len) {
  (void)comm, (void)text, (void)len;
  return ncclSuccess;
}
static inline int dccl_dev_comm_busy(struct dccl_coll_comm *comm) { (void)comm; return 0; }
static inline int dccl_dev_comm_stalled(struct dccl_coll_comm *comm, struct dccl_slot_header *call, int64_t *idle_ns) {
  (void)comm, (void)call, (void)idle_ns;
  return 0;
}
static inline int dccl_dev_comm_captured(const struct dccl_coll_comm *comm) { (void)comm; return 0; }
static inline void dccl_dev_comm_wait(struct dccl_coll_comm *comm) { (void)comm; }
static inline int dccl_dev_ce_possible(const struct dccl_coll_comm *comm) { (void)comm; return 0; }
static inline size_t dccl_dev_ce_chunk(void) { return 0; }
static inline ncclResult_t dccl_dev_ce_export(struct dccl_coll_comm *comm, size_t chunk, int p2p,
                                              struct dccl_peer_mem_export *e) {
  (void)comm, (void)chunk, (void)p2p, (void)e;
  return ncclInvalidUsage;
}
static inline ncclResult_t dccl_dev_ce_connect(struct dccl_coll_comm *comm, size_t chunk, int p2p,
                                               const struct dccl_peer_mem_export *exports, const int32_t *pids) {
  (void)comm, (void)chunk, (void)p2p, (void)exports, (void)pids;
  return ncclInvalidUsage;
}
static inline int dccl_dev_ce_takes(const struct dccl_coll_comm *comm, const struct dccl_op *op) {
  (void)comm, (void)op;
  return 0;
}
static inline int dccl_dev_ce_on(const struct dccl_coll_comm *comm) {
  (void)comm;
  return 0;
}
static inline ncclResult_t dccl_dev_launch(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream) {
  (void)comm, (void)list, (void)stream;
  return ncclInvalidUsage;
}
static inline ncclResult_t dccl_dev_launch_ranks(struct dccl_coll_comm *const *comms, void *const *streams,
                                                 int n, struct dccl_op *list) {
  (void)comms, (void)streams, (void)n, (void)list;
  return ncclInvalidUsage;
}
static inline ncclResult_t dccl_dev_copy(struct dccl_coll_comm *comm, void *dst, const void *src, size_t bytes,
                                         void *stream) {
  (void)comm, (void)dst, (void)src, (void)bytes, (void)stream;
  return ncclInvalidUsage;
}
static inline ncclResult_t dccl_dev_time_rounds(struct dccl_coll_comm *comm, int n,
                                                ncclResult_t (*issue)(void *arg, void *stream, void *scratch),
                                                void *arg, double *us) {
  (void)comm, (void)n, (void)issue, (void)arg, (void)us;
  return ncclInvalidUsage;
}
#endif

#endif
