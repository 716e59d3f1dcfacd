/* The copy-engine all-reduce (DCCL_CE=1), for ranks in several processes on one GPU. Without MPS their contexts
 * take turns on the GPU, so a kernel spinning on a peer holds the GPU from that peer until its time slice ends
 * (a hand-off cost 2245 us on the H200), while a stream waiting on a flag lets the other context run (143 us,
 * docs/gpu.md). So here nothing spins: each round, every rank copies piece p of its input into rank p's inbox
 * with the copy engine (through the IPC mapping of rank p's board) and raises rank p's flag with
 * cuStreamWriteValue32; waits for every peer's flag with cuStreamWaitValue32; a short kernel combines its own
 * piece from its input and the inbox in rank order; it copies the result into every peer's gather area and raises
 * their second flag; and once every peer's has risen, a short kernel copies the gathered pieces into its output.
 * Each rank's region (flags and the ranks' calls, then inbox and gather area, two of each used in alternate rounds)
 * is an allocation of its own, mapped by its peers. Rounds carry epochs counted on the host, the same on every
 * rank. A call's first round also writes the call (count, type, reduction) at every peer before the flag; the
 * combining kernel compares them and records a mismatch, as kernels on links do. */
#ifndef DCCL_COLLECTIVES_DEVICE_CE_ALLREDUCE_H_
#define DCCL_COLLECTIVES_DEVICE_CE_ALLREDUCE_H_

#include <stddef.h>
#include <stdint.h>

#include "collectives/device/dev_work.h"
#include "collectives/op.h"
#include "util/cuda_api.h"

struct dccl_ce;

/* Bytes of a rank's region for `nranks` ranks with `chunk` bytes a piece (chunk a multiple of 4096). */
size_t dccl_ce_region_bytes(int nranks, size_t chunk);

/* The piece size DCCL_CE_CHUNK asks for on this rank, a multiple of 4096 (creation takes the smallest any asks). */
size_t dccl_ce_chunk(void);

/* This rank's state: its region at `own`, every rank's region as this process addresses it (`regions`, by rank). */
ncclResult_t dccl_ce_create(int rank, int nranks, size_t chunk, CUdeviceptr own, const uint64_t *regions,
                            struct dccl_ce **out);

/* What one round asks of the kernel after the copies: filled into `w` (mode REDUCE or GATHER) and launched by the
 * caller, which counts its CTAs like any launch's. */
typedef ncclResult_t (*dccl_ce_launch_fn)(void *arg, const struct dccl_ce_work *w, CUstream stream);

/* Queues `op` (an all-reduce of device buffers) on `stream`; its two kernel parts per round go through `launch`. */
ncclResult_t dccl_ce_allreduce(struct dccl_ce *ce, const struct dccl_op *op, CUstream stream, dccl_ce_launch_fn launch,
                               void *arg);

/* Abort: this rank's flags raised past every epoch (on a stream of its own), so its streams' waits end. */
void dccl_ce_release(struct dccl_ce *ce);

void dccl_ce_free(struct dccl_ce *ce);

#endif
