/* The GPUDirect RDMA decision and the registration of device buffers (ib_gdr.h). */
#include "transports/net_ib/ib_gdr.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/cuda_driver.h"
#include "util/error.h"
#include "util/params.h"

const char *dccl_gdr_path_name(enum dccl_gdr_path path) {
  switch (path) {
    case DCCL_GDR_DMABUF: return "dma-buf";
    case DCCL_GDR_PEERMEM: return "nvidia-peermem";
    default: return "host staging";
  }
}

/* "x and y" of what the dma-buf path lacks, for the reasons. */
static void dmabuf_missing(const struct dccl_gdr_caps *caps, char *text, size_t size) {
  snprintf(text, size, "%s%s%s", caps->cu_dmabuf ? "" : "the CUDA driver or device has no dma-buf export",
           !caps->cu_dmabuf && !caps->ibv_dmabuf ? " and " : "",
           caps->ibv_dmabuf ? "" : "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)");
}

ncclResult_t dccl_gdr_decide(const char *param, const struct dccl_gdr_caps *caps, struct dccl_gdr_choice *out) {
  memset(out, 0, sizeof *out);
  out->path = DCCL_GDR_STAGING;
  int mode; /* -1 auto, 0 never, 1 required */
  if (param == NULL || param[0] == '\0' || strcasecmp(param, "auto") == 0) mode = -1;
  else if (strcmp(param, "0") == 0) mode = 0;
  else if (strcmp(param, "1") == 0) mode = 1;
  else {
    snprintf(out->reason, sizeof out->reason, "DCCL_NET_GDR=\"%s\" is not one of auto, 0 or 1", param);
    return ncclInvalidUsage;
  }
  out->required = mode == 1;
  if (mode == 0) {
    snprintf(out->reason, sizeof out->reason, "host staging: DCCL_NET_GDR=0");
    return ncclSuccess;
  }
  char missing[160];
  dmabuf_missing(caps, missing, sizeof missing);
  if (caps->gpu && caps->cu_dmabuf && caps->ibv_dmabuf) {
    out->path = DCCL_GDR_DMABUF;
    snprintf(out->reason, sizeof out->reason,
             "GPUDirect RDMA: dma-buf via cuMemGetHandleForAddressRange and ibv_reg_dmabuf_mr");
    return ncclSuccess;
  }
  if (caps->gpu && caps->peermem) {
    out->path = DCCL_GDR_PEERMEM;
    snprintf(out->reason, sizeof out->reason, "GPUDirect RDMA: nvidia-peermem (ibv_reg_mr on device memory; no "
                                              "dma-buf: %s)", missing);
    return ncclSuccess;
  }
  const char *prefix = mode == 1 ? "DCCL_NET_GDR=1 but GPUDirect RDMA is unavailable" : "host staging";
  if (!caps->gpu)
    snprintf(out->reason, sizeof out->reason, "%s: no GPU (no CUDA driver or device)", prefix);
  else
    snprintf(out->reason, sizeof out->reason, "%s: no nvidia-peermem and no dma-buf support (%s)", prefix, missing);
  return mode == 1 ? ncclSystemError : ncclSuccess;
}

typedef struct ibv_mr *(*reg_dmabuf_mr_fn)(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                                           int access);

/* ibv_reg_dmabuf_mr of the libibverbs this process loaded, or NULL before rdma-core 34. */
static reg_dmabuf_mr_fn ibv_dmabuf_entry(void) {
  return (reg_dmabuf_mr_fn)dlsym(RTLD_DEFAULT, "ibv_reg_dmabuf_mr");
}

void dccl_gdr_detect(int cuda_device, struct dccl_gdr_caps *caps) {
  caps->gpu = dccl_cuda_available();
  caps->cu_dmabuf = caps->gpu && dccl_cuda_dmabuf_supported(cuda_device);
  caps->ibv_dmabuf = ibv_dmabuf_entry() != NULL;
  caps->peermem = access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
                  access("/sys/module/nvidia_peermem", F_OK) == 0 || access("/sys/module/nv_peer_mem", F_OK) == 0;
}

ncclResult_t dccl_gdr_choose(int cuda_device, struct dccl_gdr_choice *out) {
  struct dccl_gdr_caps caps;
  dccl_gdr_detect(cuda_device, &caps);
  ncclResult_t res = dccl_gdr_decide(dccl_param_str(DCCL_PARAM_NET_GDR), &caps, out);
  if (res != ncclSuccess) return dccl_error(res, "%s", out->reason);
  static atomic_int said;
  if (atomic_exchange(&said, 1) == 0) DCCL_INFO(DCCL_NET, "%s", out->reason);
  return ncclSuccess;
}

/* --- the dma-buf registrar --- */

static int dmabuf_reg(const struct dccl_ib_registrar *self, uintptr_t start, size_t len, struct dccl_ib_mr *mr) {
  reg_dmabuf_mr_fn reg_dmabuf_mr = ibv_dmabuf_entry();
  if (reg_dmabuf_mr == NULL) return ENOSYS;
  int fd = -1;
  if (dccl_cuda_dmabuf_fd((const void *)start, len, &fd) != ncclSuccess) return EIO;
  struct ibv_mr *m = reg_dmabuf_mr((struct ibv_pd *)self->ctx, 0, len, start, fd, self->access);
  int err = m != NULL ? 0 : errno != 0 ? errno : EIO;
  close(fd); /* the registration holds its own reference to the dma-buf */
  if (m == NULL) return err;
  mr->handle = m;
  mr->lkey = m->lkey;
  mr->rkey = m->rkey;
  return 0;
}

int dccl_gdr_dmabuf_registrar(struct ibv_pd *pd, int access, struct dccl_ib_registrar *out) {
  if (ibv_dmabuf_entry() == NULL) return ENOSYS;
  int err = dccl_ib_verbs_registrar(pd, access, out); /* the same deregistration and limits, another reg */
  if (err != 0) return err;
  out->reg = dmabuf_reg;
  return 0;
}

/* --- registering a device buffer --- */

ncclResult_t dccl_gdr_register(const struct dccl_gdr_choice *choice, const struct dccl_gdr_registrars *registrars,
                               const void *addr, size_t len, struct dccl_ib_mr *mr, enum dccl_gdr_path *used) {
  *used = DCCL_GDR_STAGING;
  memset(mr, 0, sizeof *mr);
  if (choice->path == DCCL_GDR_STAGING) return ncclSuccess;
  const struct dccl_ib_registrar *r = choice->path == DCCL_GDR_DMABUF ? &registrars->dmabuf : &registrars->peermem;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = (uintptr_t)addr & ~(page - 1);
  uintptr_t end = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
  if (r->max_mr_size != 0 && end - start > r->max_mr_size) {
    DCCL_TRACE(DCCL_NET, "device buffer %p +%zu exceeds max_mr_size %llu: host staging", addr, len,
               (unsigned long long)r->max_mr_size);
    return ncclSuccess;
  }
  mr->start = start;
  mr->len = end - start;
  int err = r->reg(r, start, end - start, mr);
  if (err == 0) {
    *used = choice->path;
    return ncclSuccess;
  }
  memset(mr, 0, sizeof *mr);
  if (choice->required)
    return dccl_error(ncclSystemError, "GPUDirect RDMA (%s) registration of device buffer %p +%zu failed: %s "
                      "(DCCL_NET_GDR=1 forbids staging)", dccl_gdr_path_name(choice->path), addr, len, strerror(err));
  static atomic_int warned; /* one WARN; later failures at TRACE, or every operation would say it again */
  int level = atomic_exchange(&warned, 1) == 0 ? DCCL_LOG_WARN : DCCL_LOG_TRACE;
  DCCL_LOG_AT(level, DCCL_NET, "GPUDirect RDMA (%s) registration of device buffer %p +%zu failed: %s: host staging",
              dccl_gdr_path_name(choice->path), addr, len, strerror(err));
  return ncclSuccess;
}
