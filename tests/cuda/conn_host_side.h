/* The host thread's end of FIFOs shared with a kernel, driven through the library's own connection functions
 * (transports/transport.h: dccl_conn_send_slot/send_post/recv_slot/recv_done), as the proxy will drive them. */
#ifndef DCCL_CONN_HOST_SIDE_H_
#define DCCL_CONN_HOST_SIDE_H_

#include <stdint.h>

#include "pure/conn_desc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One FIFO: its layout and this process's mapping of its regions. */
struct conn_host_link {
  struct dccl_conn_desc desc;
  void *regions[DCCL_REGIONS];
};

/* Clears a FIFO laid out in one region (control block and slots) for a new run. */
void conn_host_fifo_init(struct conn_host_link *l);
/* Receives (or sends) `n` slots of `bytes` under `proto` on each of `nfifo` FIFOs, round robin, checking every header
 * and payload byte (or writing conn_pattern). Returns the number of wrong slots; -1 if nothing moved for
 * `timeout_s` seconds. */
long conn_host_recv(struct conn_host_link *links, int nfifo, uint64_t n, uint32_t bytes, int proto, double timeout_s);
long conn_host_send(struct conn_host_link *links, int nfifo, uint64_t n, uint32_t bytes, int proto, double timeout_s);
/* Ping-pong partner: receives each of `n` slots on `in`, checks it, and sends the same pattern back on `out`. */
long conn_host_echo(struct conn_host_link *in, struct conn_host_link *out, uint64_t n, uint32_t bytes, int proto,
                    double timeout_s);

#ifdef __cplusplus
}
#endif

#endif
