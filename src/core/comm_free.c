/* Tearing a communicator down, and recording its failure. Nothing here waits for a peer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/comm_init.h"
#include "core/debug.h"

void dccl_comm_set_failed(struct dccl_comm *comm, ncclResult_t code, const char *text) {
  pthread_mutex_lock(&comm->error_lock);
  if (!comm->error_text[0]) snprintf(comm->error_text, sizeof(comm->error_text), "%s", text ? text : "");
  pthread_mutex_unlock(&comm->error_lock);
  int ok = ncclSuccess;
  atomic_compare_exchange_strong(&comm->async_error, &ok, (int)code);
  comm->abort_flag = 1;
  /* Tell the peers at once, so they stop waiting for us instead of discovering it later. */
  pthread_mutex_lock(&comm->conn_lock);
  for (struct dccl_conn_entry *e = comm->conns; e; e = e->next)
    if (e->conn.transport && e->conn.transport->abort) e->conn.transport->abort(&e->conn);
  pthread_mutex_unlock(&comm->conn_lock);
}

void dccl_comm_free(struct dccl_comm *comm, int goodbye) {
  if (!comm) return;
  if (comm->bootstrap) {
    if (goodbye) dccl_bootstrap_say_goodbye(comm->bootstrap);
    dccl_bootstrap_close(comm->bootstrap); /* stops the monitor thread before anything it reads is freed */
  }
  struct dccl_conn_entry *e = comm->conns;
  while (e) {
    struct dccl_conn_entry *next = e->next;
    if (e->conn.transport && e->conn.transport->close) e->conn.transport->close(&e->conn);
    free(e);
    e = next;
  }
  if (dccl_transport_shm.comm_free) dccl_transport_shm.comm_free(comm);
  if (dccl_transport_socket.comm_free) dccl_transport_socket.comm_free(comm);
  for (int c = 0; c < DCCL_MAX_CHANNELS; c++) free(comm->rings[c].order);
  free(comm->peers);
  free(comm->p2p_send_seq);
  free(comm->p2p_recv_seq);
  pthread_mutex_destroy(&comm->conn_lock);
  pthread_mutex_destroy(&comm->error_lock);
  comm->magic = 0;
  free(comm);
}
