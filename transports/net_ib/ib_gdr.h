/* GPUDirect RDMA: whether the NIC reads and writes device buffers directly, and how they are registered.
 *
 * Two ways to register device memory with a NIC, detected at run time (the library is built once, and no
 * machine need have both a GPU and an RDMA NIC):
 *   - dma-buf: the CUDA driver exports the range as a dma-buf (cuMemGetHandleForAddressRange, on a device that
 *     reports CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) and libibverbs registers it (ibv_reg_dmabuf_mr, rdma-core
 *     34 and later; looked up with dlsym, so an older libibverbs still loads). Preferred: upstream kernel code.
 *   - peer memory: the nvidia-peermem module (or the older nv_peer_mem) is loaded, so ibv_reg_mr itself accepts
 *     a device pointer.
 * Otherwise device buffers are staged through host memory (the transport's FIFO).
 * DCCL_NET_GDR chooses: `auto` (the first available of dma-buf, peer memory, staging), `0` (staging), `1`
 * (GPUDirect RDMA or an error naming what is missing). dccl_gdr_decide is the pure rule; dccl_gdr_choose runs
 * it on the real detection and says once at INFO (NET) which path and why.
 * A registration that fails on the chosen path falls back to staging, with a WARN the first time (under `1`: an
 * error). */
#ifndef DCCL_IB_GDR_H_
#define DCCL_IB_GDR_H_

#include "dccl.h"
#include "transports/net_ib/ib_regcache.h"

enum dccl_gdr_path { DCCL_GDR_STAGING = 0, DCCL_GDR_PEERMEM = 1, DCCL_GDR_DMABUF = 2 };

/* What this machine offers (dccl_gdr_detect), or what a test pretends it does. */
struct dccl_gdr_caps {
  int gpu;        /* the CUDA driver loaded and found a device */
  int cu_dmabuf;  /* the driver has cuMemGetHandleForAddressRange and the device reports dma-buf support */
  int ibv_dmabuf; /* libibverbs has ibv_reg_dmabuf_mr */
  int peermem;    /* nvidia-peermem (or nv_peer_mem) is loaded */
};

struct dccl_gdr_choice {
  enum dccl_gdr_path path;
  int required; /* DCCL_NET_GDR=1: a failed registration is an error, not a fallback */
  char reason[256];
};

/* The rule, a pure function: `param` is DCCL_NET_GDR's text (NULL or "" mean auto). Returns ncclSuccess with the
 * path and its reason, ncclInvalidUsage for a value other than auto/0/1, ncclSystemError for `1` without
 * support (reason names what is missing). */
ncclResult_t dccl_gdr_decide(const char *param, const struct dccl_gdr_caps *caps, struct dccl_gdr_choice *out);
/* The real detection for CUDA device `cuda_device` (an ordinal). */
void dccl_gdr_detect(int cuda_device, struct dccl_gdr_caps *caps);
/* Detection + DCCL_NET_GDR + the rule; the first call logs the choice at INFO, an error goes through dccl_error. */
ncclResult_t dccl_gdr_choose(int cuda_device, struct dccl_gdr_choice *out);
const char *dccl_gdr_path_name(enum dccl_gdr_path path);

/* The registrars for the two GPUDirect paths (peermem is plain ibv_reg_mr: dccl_ib_verbs_registrar). */
struct dccl_gdr_registrars {
  struct dccl_ib_registrar dmabuf;
  struct dccl_ib_registrar peermem;
};
/* The dma-buf registrar: cuMemGetHandleForAddressRange, then ibv_reg_dmabuf_mr on `pd` (the range's address is
 * its iova, so work requests use device addresses as they use host ones). 0, or ENOSYS when libibverbs lacks
 * ibv_reg_dmabuf_mr, or the errno of ibv_query_device. */
int dccl_gdr_dmabuf_registrar(struct ibv_pd *pd, int access, struct dccl_ib_registrar *out);

/* Registers the device buffer [addr, addr+len) (page-rounded) along choice->path. *used is the path taken:
 * the chosen one with *mr filled (deregister with that registrar's dereg), or DCCL_GDR_STAGING (nothing
 * registered: stage through host memory): chosen, past max_mr_size, or after a failed registration (the first
 * one logged at WARN). Under
 * choice->required a failed registration returns ncclSystemError instead. */
ncclResult_t dccl_gdr_register(const struct dccl_gdr_choice *choice, const struct dccl_gdr_registrars *registrars,
                               const void *addr, size_t len, struct dccl_ib_mr *mr, enum dccl_gdr_path *used);

#endif
