/* Device links through a network transport's own FIFO (net_socket, net_ib): the FIFO each side keeps is pinned host
 * memory its GPU maps, so the kernel at the sending end fills slots across PCIe, the transport sends them from there
 * into the peer's FIFO (moved by the communicator's link pump, transports/link_pump.h), and the kernel at the
 * receiving end reads them across PCIe. The kernels order the counters at system scope: a host thread is at the
 * other end of each. */
#ifndef DCCL_HOST_FIFO_DEVICE_H_
#define DCCL_HOST_FIFO_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "transports/transport.h"

struct dccl_host_fifo_device {
  void *fifo; /* the region, page-aligned, `bytes` a whole number of pages */
  size_t bytes;
  int registered; /* fifo is registered with CUDA */
  uint64_t view;  /* the kernels' view of the link (struct dccl_dev_conn, a CUdeviceptr), or 0 */
};

/* Registers `fifo` (laid out as conn->desc says) with the communicator's GPU and writes the kernels' view into
 * conn->dev. unmap undoes what map did, also after a partial map or none (a zeroed `d`). */
ncclResult_t dccl_host_fifo_device_map(struct dccl_conn *conn, void *fifo, size_t bytes,
                                       struct dccl_host_fifo_device *d);
void dccl_host_fifo_device_unmap(struct dccl_conn *conn, struct dccl_host_fifo_device *d);

#endif
