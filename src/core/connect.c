/* Making connections: choose the transport both ends agree on, run setup, swap the info blobs over the
 * bootstrap, connect send sides, then receive sides (a send side's connect never waits for its peer, so no
 * ordering between ranks can deadlock). */
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/debug.h"
#include "core/params.h"

#define DCCL_TAG_CONNECT 0x43000000u

struct dccl_conn *dccl_comm_find_conn(struct dccl_comm *comm, int peer, int is_send, int lane) {
  struct dccl_conn_entry *e = atomic_load_explicit(&comm->conns, memory_order_acquire);
  while (e && !(e->peer == peer && e->is_send == is_send && e->lane == lane)) e = e->next;
  return e ? &e->conn : NULL;
}

/* The same answer on both ends: it depends only on the two peer infos and the (uniform) environment. */
static ncclResult_t choose_transport(struct dccl_comm *comm, int peer, const struct dccl_transport **out) {
  const char *forced = dccl_param_str(DCCL_PARAM_TRANSPORT);
  const struct dccl_peer_info *me = &comm->peers[comm->rank], *them = &comm->peers[peer];
  if (forced[0] && strcmp(forced, "shm") && strcmp(forced, "socket"))
    return dccl_error(ncclInvalidArgument, "DCCL_TRANSPORT=%s: expected shm or socket", forced);
  if (!strcmp(forced, "socket")) {
    *out = &dccl_transport_socket;
  } else if (dccl_transport_shm.can_connect(me, them) && (me->host_hash == them->host_hash || forced[0])) {
    *out = &dccl_transport_shm;
  } else if (!strcmp(forced, "shm")) {
    return dccl_error(ncclInvalidUsage, "DCCL_TRANSPORT=shm, but rank %d (host %s) is on another host than rank %d",
                      peer, them->hostname, comm->rank);
  } else {
    *out = &dccl_transport_socket;
  }
  return ncclSuccess;
}

static uint32_t connect_tag(int lane, int sender_is_send) {
  return DCCL_TAG_CONNECT | ((uint32_t)lane << 1) | (uint32_t)sender_is_send;
}

ncclResult_t dccl_comm_connect(struct dccl_comm *comm, const struct dccl_conn_req *reqs, int n) {
  int missing = 0; /* the common case, every link already made, allocates nothing */
  for (int i = 0; i < n && !missing; i++) missing = !dccl_comm_find_conn(comm, reqs[i].peer, reqs[i].is_send, reqs[i].lane);
  if (!missing) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  struct dccl_conn_entry **fresh = calloc((size_t)(n ? n : 1), sizeof(*fresh));
  char(*info)[DCCL_CONN_INFO_BYTES] = calloc((size_t)(n ? n : 1), DCCL_CONN_INFO_BYTES);
  int nfresh = 0;
  if (!fresh || !info) {
    res = dccl_error(ncclSystemError, "out of memory connecting");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    if (dccl_comm_find_conn(comm, reqs[i].peer, reqs[i].is_send, reqs[i].lane)) continue;
    struct dccl_conn_entry *e = calloc(1, sizeof(*e));
    if (!e) {
      res = dccl_error(ncclSystemError, "out of memory connecting");
      goto out;
    }
    e->peer = reqs[i].peer;
    e->is_send = reqs[i].is_send;
    e->lane = reqs[i].lane;
    e->conn.comm = comm;
    e->conn.peer = e->peer;
    e->conn.is_send = e->is_send;
    e->conn.lane = e->lane;
    fresh[nfresh++] = e;
    DCCLCHECKGOTO(choose_transport(comm, e->peer, &e->conn.transport), res, out);
    DCCLCHECKGOTO(e->conn.transport->setup(&e->conn, info[nfresh - 1]), res, out);
    DCCLCHECKGOTO(dccl_bootstrap_send(comm->bootstrap, e->peer, connect_tag(e->lane, e->is_send),
                                      info[nfresh - 1], DCCL_CONN_INFO_BYTES),
                  res, out);
  }
  for (int i = 0; i < nfresh; i++) {
    struct dccl_conn_entry *e = fresh[i];
    /* What the peer sent for the mirror link: its is_send is the opposite of ours. */
    DCCLCHECKGOTO(dccl_bootstrap_recv(comm->bootstrap, e->peer, connect_tag(e->lane, !e->is_send), info[i],
                                      DCCL_CONN_INFO_BYTES),
                  res, out);
  }
  for (int pass = 1; pass >= 0; pass--)
    for (int i = 0; i < nfresh; i++)
      if (fresh[i]->is_send == pass) DCCLCHECKGOTO(fresh[i]->conn.transport->connect(&fresh[i]->conn, info[i]), res, out);
  pthread_mutex_lock(&comm->conn_lock);
  for (int i = 0; i < nfresh; i++) {
    DCCL_INFO(DCCL_INIT, "connected %s rank %d lane %d via %s", fresh[i]->is_send ? "to" : "from", fresh[i]->peer,
              fresh[i]->lane, fresh[i]->conn.transport->name);
    fresh[i]->next = atomic_load_explicit(&comm->conns, memory_order_relaxed);
    atomic_store_explicit(&comm->conns, fresh[i], memory_order_release);
    fresh[i] = NULL;
  }
  pthread_mutex_unlock(&comm->conn_lock);
out:
  if (fresh)
    for (int i = 0; i < nfresh; i++)
      if (fresh[i]) {
        if (fresh[i]->conn.transport && fresh[i]->conn.transport->close) fresh[i]->conn.transport->close(&fresh[i]->conn);
        free(fresh[i]);
      }
  free(fresh);
  free(info);
  return res;
}
