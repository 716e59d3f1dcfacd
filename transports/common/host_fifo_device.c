/* Device links through a network transport's own FIFO in pinned host memory (transports/host_fifo_device.h). */
#include "transports/host_fifo_device.h"

#include <string.h>

#include "pure/dev_conn.h"
#include "util/cuda_api.h"
#include "util/error.h"

static ncclResult_t enter_context(const struct dccl_conn *conn) {
  if (!conn->ctx->cu_ctx)
    return dccl_error(ncclInvalidUsage, "%s device link with rank %d: this rank's communicator has no CUDA device",
                      conn->transport->name, conn->peer);
  DCCLCHECK(dccl_cuda_api_load());
  DCCL_CUCHECK(dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx), "cuCtxSetCurrent for a device link");
  return ncclSuccess;
}

ncclResult_t dccl_host_fifo_device_map(struct dccl_conn *conn, void *fifo, size_t bytes,
                                       struct dccl_host_fifo_device *d) {
  DCCLCHECK(enter_context(conn));
  d->fifo = fifo;
  d->bytes = bytes;
  /* PORTABLE: the communicator's context is only one of the process's. */
  DCCL_CUCHECK(dccl_cu.mem_host_register(fifo, bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
               "cuMemHostRegister of a device link's FIFO");
  d->registered = 1;
  __atomic_add_fetch(&conn->ctx->pinned_bytes, bytes, __ATOMIC_RELAXED);
  CUdeviceptr region;
  DCCL_CUCHECK(dccl_cu.mem_host_get_device_pointer(&region, fifo, 0), "cuMemHostGetDevicePointer of a FIFO");
  struct dccl_dev_conn dc;
  memset(&dc, 0, sizeof(dc));
  dc.desc = conn->desc;
  dc.regions[DCCL_REGION_RECV] = dc.regions[DCCL_REGION_SEND] = (char *)(uintptr_t)region;
  dc.peer = conn->peer;
  dc.same_gpu = 0; /* a host thread reads and writes the counters */
  CUdeviceptr view;
  DCCL_CUCHECK(dccl_cu.mem_alloc(&view, sizeof(dc)), "cuMemAlloc of a link's kernel view");
  d->view = view;
  __atomic_add_fetch(&conn->ctx->dev_bytes, sizeof(dc), __ATOMIC_RELAXED);
  DCCL_CUCHECK(dccl_cu.memcpy_htod(view, &dc, sizeof(dc)), "writing a link's kernel view");
  conn->dev = (void *)(uintptr_t)view;
  return ncclSuccess;
}

/* By now no kernel of the communicator runs (destroy waited for them) and the pump has stopped. */
void dccl_host_fifo_device_unmap(struct dccl_conn *conn, struct dccl_host_fifo_device *d) {
  if (!d->registered && !d->view) return;
  if (conn->ctx->cu_ctx && dccl_cuda_api_load() == ncclSuccess) {
    dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx);
    if (d->registered) {
      dccl_cu.mem_host_unregister(d->fifo);
      __atomic_sub_fetch(&conn->ctx->pinned_bytes, d->bytes, __ATOMIC_RELAXED);
    }
    if (d->view) {
      dccl_cu.mem_free((CUdeviceptr)d->view);
      __atomic_sub_fetch(&conn->ctx->dev_bytes, sizeof(struct dccl_dev_conn), __ATOMIC_RELAXED);
    }
  }
  memset(d, 0, sizeof(*d));
  conn->dev = NULL;
}
