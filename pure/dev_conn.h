/* A device link as kernels see it: one side's connection in device memory, made by a device transport
 * (transports/p2p) and read by the kernels (collectives/device). Compiles as C11 and CUDA. */
#ifndef DCCL_DEV_CONN_H_
#define DCCL_DEV_CONN_H_

#include <stdint.h>

#include "pure/conn_desc.h"

/* The most an LL step of a kernel carries: staged in shared memory, a 16-byte line (8 bytes of payload) per thread
 * of a 512-thread CTA. Device links lay out LL slots of this size. 4 KiB because LL slots of 4 KiB streamed between
 * two processes' kernels at 1.22 us a slot, where a bulk slot costs 2.86 us even at 64 KiB (docs/performance.md,
 * "conn_ipc"): below that a bulk step is all overhead. */
#define DCCL_DEV_LL_BYTES 4096

/* One side of a link as kernels see it, in device memory. Written by the host when the link is made; after that
 * only kernels write `pos` and `nops`, so a replayed CUDA graph continues where the last launch stopped. */
struct dccl_dev_conn {
  char *regions[DCCL_REGIONS]; /* this process's device-visible mappings of the receiver's and sender's regions */
  struct dccl_conn_desc desc;
  uint64_t pos;        /* slots this side filled (sender) or drained (receiver) */
  uint64_t peer_seen;  /* the other side's counter as last read (head for a sender, tail for a receiver): a lower
                          bound, so a step reads the counter only when the one it holds does not suffice */
  uint64_t nops;       /* operations run over this link: the slot header's seq, the same on both sides */
  int32_t peer;        /* the rank at the other end, for error reports */
  uint32_t same_gpu;   /* both ends on one GPU: the counters need GPU-scope ordering only */
};

#endif
