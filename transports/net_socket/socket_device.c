/* Device links over sockets: the FIFO each side keeps is pinned host memory its GPU maps, so the kernel at the
 * sending end fills slots across PCIe, the link pump's thread (transports/link_pump.h) sends them from there and
 * receives into the peer's FIFO, and the kernel at the receiving end reads them across PCIe: no copy in the proxy
 * beyond the kernel's own socket copies. The kernels order the counters at system scope (a host thread is at the
 * other end of each). */
#include <string.h>

#include "pure/dev_conn.h"
#include "transports/net_socket/socket_private.h"
#include "util/cuda_api.h"
#include "util/error.h"

static ncclResult_t enter_context(const struct dccl_conn *conn) {
  if (!conn->ctx->cu_ctx)
    return dccl_error(ncclInvalidUsage, "device socket link with rank %d: this rank's communicator has no CUDA device",
                      conn->peer);
  DCCLCHECK(dccl_cuda_api_load());
  DCCL_CUCHECK(dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx), "socket: cuCtxSetCurrent");
  return ncclSuccess;
}

ncclResult_t dccl_socket_device_map(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  DCCLCHECK(enter_context(conn));
  /* PORTABLE: the communicator's context is only one of the process's. */
  DCCL_CUCHECK(
      dccl_cu.mem_host_register(sc->fifo, sc->fifo_bytes, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
      "socket: cuMemHostRegister of a device link's FIFO");
  sc->registered = 1;
  __atomic_add_fetch(&conn->ctx->pinned_bytes, sc->fifo_bytes, __ATOMIC_RELAXED);
  CUdeviceptr region;
  DCCL_CUCHECK(dccl_cu.mem_host_get_device_pointer(&region, sc->fifo, 0), "socket: cuMemHostGetDevicePointer");
  struct dccl_dev_conn dc;
  memset(&dc, 0, sizeof(dc));
  dc.desc = conn->desc;
  dc.regions[DCCL_REGION_RECV] = dc.regions[DCCL_REGION_SEND] = (char *)(uintptr_t)region;
  dc.peer = conn->peer;
  dc.same_gpu = 0; /* the pump's thread reads and writes the counters */
  CUdeviceptr view;
  DCCL_CUCHECK(dccl_cu.mem_alloc(&view, sizeof(dc)), "socket: cuMemAlloc of a link's kernel view");
  sc->dev_view = view;
  __atomic_add_fetch(&conn->ctx->dev_bytes, sizeof(dc), __ATOMIC_RELAXED);
  DCCL_CUCHECK(dccl_cu.memcpy_htod(view, &dc, sizeof(dc)), "socket: writing a link's kernel view");
  conn->dev = (void *)(uintptr_t)view;
  return ncclSuccess;
}

/* By now no kernel of the communicator runs (destroy waited for them) and the pump has stopped. */
void dccl_socket_device_unmap(struct dccl_conn *conn) {
  struct dccl_socket_conn *sc = conn->priv;
  if (!sc->registered && !sc->dev_view) return;
  if (conn->ctx->cu_ctx && dccl_cuda_api_load() == ncclSuccess) {
    dccl_cu.ctx_set_current((CUcontext)conn->ctx->cu_ctx);
    if (sc->registered) {
      dccl_cu.mem_host_unregister(sc->fifo);
      __atomic_sub_fetch(&conn->ctx->pinned_bytes, sc->fifo_bytes, __ATOMIC_RELAXED);
    }
    if (sc->dev_view) {
      dccl_cu.mem_free((CUdeviceptr)sc->dev_view);
      __atomic_sub_fetch(&conn->ctx->dev_bytes, sizeof(struct dccl_dev_conn), __ATOMIC_RELAXED);
    }
  }
  sc->registered = 0;
  sc->dev_view = 0;
  conn->dev = NULL;
}
