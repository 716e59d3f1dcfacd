/* Collectives by copy engines (DCCL_CE), for ranks in several processes on one GPU. Without MPS their contexts take
 * turns on the GPU, so a kernel spinning on a peer holds the GPU from that peer until its time slice ends (a
 * hand-off cost 2245 us on the H200), while a stream waiting on a flag lets the other context run (143 us,
 * docs/gpu.md). So here nothing spins: the copy engines move pieces into peers' inboxes (cuMemcpyAsync through the
 * IPC mapping of each peer's region), cuStreamWriteValue32 raises flags at the peers, cuStreamWaitValue32 waits for
 * the peers' flags, and short kernels combine or copy what has arrived.
 * - all-reduce, two phases a round: piece p of every input to rank p's inbox; flags; rank p combines its piece in
 *   rank order and copies the result into every peer's gather area; flags; a kernel copies the gathered pieces out.
 * - reduce-scatter and reduce, one phase: each rank's block for rank p (the root's piece, for reduce) to p's inbox;
 *   flags; rank p combines in rank order.
 * - all-gather and broadcast, one phase: a rank's input piece (the root's, for broadcast) to every peer's inbox;
 *   flags; a kernel copies the inbox into the output.
 * Each rank's region (flags and the ranks' calls, then inbox and gather area, two of each used in alternate rounds)
 * is an allocation of its own, mapped by its peers. Rounds carry epochs counted on the host, the same on every
 * rank; every rank raises its flag at every peer each round, so a slot is refilled only after its reader's stream
 * passed the kernel that read it. A call's first round also writes the call (kind, root, count, type, reduction) at
 * every peer before the flag; that round's kernel compares them and records a mismatch, as kernels on links do.
 * - send/recv (DCCL_CE_P2P), chunk by chunk through the receiver's point-to-point inbox (see dccl_ce_p2p). */
#ifndef DCCL_COLLECTIVES_DEVICE_CE_COLLECTIVES_H_
#define DCCL_COLLECTIVES_DEVICE_CE_COLLECTIVES_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/device/dev_work.h"
#include "collectives/op.h"
#include "util/cuda_api.h"

struct dccl_ce;

/* Bytes of a rank's region for `nranks` ranks with `chunk` bytes a piece (chunk a multiple of 4096), with the
 * point-to-point inbox where `p2p`. */
size_t dccl_ce_region_bytes(int nranks, size_t chunk, int p2p);

/* The piece size DCCL_CE_CHUNK asks for on this rank, a multiple of 4096 (creation takes the smallest any asks). */
size_t dccl_ce_chunk(void);

/* This rank's state: its region at `own`, every rank's region as this process addresses it (`regions`, by rank);
 * `p2p`: send/recv too (every rank's region has the point-to-point inbox). */
ncclResult_t dccl_ce_create(int rank, int nranks, size_t chunk, int p2p, CUdeviceptr own, const uint64_t *regions,
                            struct dccl_ce **out);

/* What one round asks of the kernel after the copies: filled into `w` (mode REDUCE or GATHER) and launched by the
 * caller, which counts its CTAs like any launch's. */
typedef ncclResult_t (*dccl_ce_launch_fn)(void *arg, const struct dccl_ce_work *w, CUstream stream);

/* Whether the copy engines run operations of `kind`: all-reduce, reduce-scatter, reduce, all-gather, broadcast, and
 * send/recv where `ce` was made with them. */
int dccl_ce_runs(const struct dccl_ce *ce, int kind);

/* Queues `op` (a collective dccl_ce_runs takes, device buffers, count > 0) on `stream`; its kernel part of each round
 * goes through `launch`. */
ncclResult_t dccl_ce_collective(struct dccl_ce *ce, const struct dccl_op *op, CUstream stream, dccl_ce_launch_fn launch,
                                void *arg);

/* Queues a group's send/recv operations (device buffers, count > 0, `nops` >= 1, in the group's order, which every
 * rank's matching operations share) on `stream`, then a kernel through `launch` (every receive's copy is one too). */
ncclResult_t dccl_ce_p2p(struct dccl_ce *ce, struct dccl_op *const *ops, int nops, CUstream stream,
                         dccl_ce_launch_fn launch, void *arg);

/* Abort: this rank's flags raised past every epoch (on a stream of its own), so its streams' waits end. */
void dccl_ce_release(struct dccl_ce *ce);

void dccl_ce_free(struct dccl_ce *ce);

#endif
