/* Making connections: choose the transport both ends agree on, run setup, swap the info blobs over the
 * bootstrap, connect send sides, then receive sides (a send side's connect never waits for its peer, so no
 * ordering between ranks can deadlock). Transports with a start() confirm readiness in one more exchange, and a
 * transport with a fallback (net_ib -> sockets) is replaced on both ends when either end could not make it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/debug.h"
#include "core/params.h"

/* Tags: round << 16 | lane << 1 | sender's is_send. */
#define DCCL_TAG_CONNECT 0x43000000u
enum { ROUND_SETUP = 0, ROUND_CONFIRM = 1, ROUND_FALLBACK = 2 };

/* What one end tells the other about a link, each round. */
struct conn_msg {
  uint32_t failed;  /* this end could not set up / connect the link */
  char reason[252]; /* why, for the other end's warning */
  char info[DCCL_CONN_INFO_BYTES];
};

/* One link being made, and its progress through the rounds. */
struct fresh_link {
  struct dccl_conn_entry *e;
  struct conn_msg mine, theirs;
  int setup_ok;  /* both ends set the link up (both know it after the first exchange) */
  int fall_back; /* either end failed: both switch to the transport's fallback */
};

struct dccl_conn *dccl_comm_find_conn(struct dccl_comm *comm, int peer, int is_send, int lane) {
  struct dccl_conn_entry *e = atomic_load_explicit(&comm->conns, memory_order_acquire);
  while (e && !(e->peer == peer && e->is_send == is_send && e->lane == lane)) e = e->next;
  return e ? &e->conn : NULL;
}

static const struct dccl_transport *named_transport(const char *name) {
  if (!strcmp(name, "shm")) return &dccl_transport_shm;
  if (!strcmp(name, "socket")) return &dccl_transport_socket;
#ifdef DCCL_HAVE_IBVERBS
  if (!strcmp(name, "ib") || !strcmp(name, "net_ib")) return &dccl_transport_ib;
#endif
  return NULL;
}

/* The same answer on both ends: it depends only on the two peer infos and the (uniform) environment. */
static ncclResult_t choose_transport(struct dccl_comm *comm, int peer, const struct dccl_transport **out) {
  const char *forced = dccl_param_str(DCCL_PARAM_TRANSPORT);
  const struct dccl_peer_info *me = &comm->peers[comm->rank], *them = &comm->peers[peer];
  if (forced[0]) {
    *out = named_transport(forced);
    if (!*out)
      return dccl_error(ncclInvalidArgument, "DCCL_TRANSPORT=%s: expected shm, socket%s", forced,
#ifdef DCCL_HAVE_IBVERBS
                        " or ib"
#else
                        " (this build has no libibverbs, so no ib)"
#endif
      );
    if (!(*out)->can_connect(me, them))
      return dccl_error(ncclInvalidUsage, "DCCL_TRANSPORT=%s, but it cannot reach rank %d (host %s) from rank %d%s",
                        forced, peer, them->hostname, comm->rank,
                        *out == &dccl_transport_shm ? " (another host)" : " (no active RDMA port on both ends)");
    return ncclSuccess;
  }
  if (dccl_transport_shm.can_connect(me, them) && me->host_hash == them->host_hash) *out = &dccl_transport_shm;
#ifdef DCCL_HAVE_IBVERBS
  else if (dccl_transport_ib.can_connect(me, them)) *out = &dccl_transport_ib;
#endif
  else *out = &dccl_transport_socket;
  return ncclSuccess;
}

static uint32_t tag(int round, int lane, int sender_is_send) {
  return DCCL_TAG_CONNECT | ((uint32_t)round << 16) | ((uint32_t)lane << 1) | (uint32_t)sender_is_send;
}
static ncclResult_t send_msg(struct dccl_comm *comm, struct fresh_link *f, int round, size_t bytes) {
  return dccl_bootstrap_send(comm->bootstrap, f->e->peer, tag(round, f->e->lane, f->e->is_send), &f->mine, bytes);
}
static ncclResult_t recv_msg(struct dccl_comm *comm, struct fresh_link *f, int round, size_t bytes) {
  return dccl_bootstrap_recv(comm->bootstrap, f->e->peer, tag(round, f->e->lane, !f->e->is_send), &f->theirs, bytes);
}

/* A failure of a transport with a fallback is recorded for the peer instead of returned. */
static ncclResult_t note(struct fresh_link *f, ncclResult_t r) {
  if (r == ncclSuccess) return r;
  if (!f->e->conn.transport->fallback || dccl_param_str(DCCL_PARAM_TRANSPORT)[0]) return r;
  f->mine.failed = 1;
  snprintf(f->mine.reason, sizeof(f->mine.reason), "%s", dccl_last_error());
  return ncclSuccess;
}

static void close_conn(struct dccl_conn *c) {
  if (c->transport && c->transport->close) c->transport->close(c);
}

/* Setup on this end, then the blobs both ways. */
static ncclResult_t setup_round(struct dccl_comm *comm, struct fresh_link *fl, int n, int round) {
  for (int i = 0; i < n; i++) {
    struct fresh_link *f = &fl[i];
    memset(&f->mine, 0, sizeof(f->mine));
    DCCLCHECK(note(f, f->e->conn.transport->setup(&f->e->conn, f->mine.info)));
    DCCLCHECK(send_msg(comm, f, round, sizeof(f->mine)));
  }
  for (int i = 0; i < n; i++) DCCLCHECK(recv_msg(comm, &fl[i], round, sizeof(fl[i].theirs)));
  return ncclSuccess;
}

/* Connect send sides first; then, for transports that need it, confirm both ends succeeded. */
static ncclResult_t connect_round(struct dccl_comm *comm, struct fresh_link *fl, int n) {
  for (int i = 0; i < n; i++) fl[i].setup_ok = !fl[i].mine.failed && !fl[i].theirs.failed;
  for (int pass = 1; pass >= 0; pass--)
    for (int i = 0; i < n; i++) {
      struct fresh_link *f = &fl[i];
      if (f->e->is_send != pass || !f->setup_ok) continue;
      DCCLCHECK(note(f, f->e->conn.transport->connect(&f->e->conn, f->theirs.info)));
    }
  int confirming = 0;
  for (int i = 0; i < n; i++)
    if (fl[i].e->conn.transport->start && fl[i].setup_ok) {
      confirming = 1;
      DCCLCHECK(send_msg(comm, &fl[i], ROUND_CONFIRM, offsetof(struct conn_msg, info)));
    }
  for (int i = 0; i < n && confirming; i++)
    if (fl[i].e->conn.transport->start && fl[i].setup_ok)
      DCCLCHECK(recv_msg(comm, &fl[i], ROUND_CONFIRM, offsetof(struct conn_msg, info)));
  for (int i = 0; i < n; i++) {
    struct fresh_link *f = &fl[i];
    f->fall_back = f->mine.failed || f->theirs.failed;
    if (!f->fall_back && f->e->conn.transport->start) DCCLCHECK(f->e->conn.transport->start(&f->e->conn));
  }
  return ncclSuccess;
}

/* The links either end could not make switch, on both ends, to the fallback transport. */
static ncclResult_t fall_back(struct dccl_comm *comm, struct fresh_link *fl, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    struct fresh_link *f = &fl[i];
    if (!f->fall_back) continue;
    struct dccl_conn *c = &f->e->conn;
    DCCL_WARN(DCCL_NET, "%s link %s rank %d (host %s) could not be made (%s: %s); using %s", c->transport->name,
              c->is_send ? "to" : "from", c->peer, comm->peers[c->peer].hostname,
              f->mine.failed ? "here" : "there", f->mine.failed ? f->mine.reason : f->theirs.reason,
              c->transport->fallback->name);
    const struct dccl_transport *next = c->transport->fallback;
    close_conn(c);
    int peer = c->peer, is_send = c->is_send, lane = c->lane;
    *c = (struct dccl_conn){.transport = next, .comm = comm, .peer = peer, .is_send = is_send, .lane = lane};
    fl[m++] = *f;
  }
  if (m == 0) return ncclSuccess;
  DCCLCHECK(setup_round(comm, fl, m, ROUND_FALLBACK));
  for (int i = 0; i < m; i++)
    if (fl[i].mine.failed || fl[i].theirs.failed)
      return dccl_error(ncclSystemError, "connecting to rank %d: the fallback failed too (%s)", fl[i].e->peer,
                        fl[i].mine.failed ? fl[i].mine.reason : fl[i].theirs.reason);
  return connect_round(comm, fl, m);
}

ncclResult_t dccl_comm_connect(struct dccl_comm *comm, const struct dccl_conn_req *reqs, int n) {
  int missing = 0; /* the common case, every link already made, allocates nothing */
  for (int i = 0; i < n && !missing; i++) missing = !dccl_comm_find_conn(comm, reqs[i].peer, reqs[i].is_send, reqs[i].lane);
  if (!missing) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  struct fresh_link *fl = calloc((size_t)(n ? n : 1), sizeof(*fl));
  struct dccl_conn_entry **entries = calloc((size_t)(n ? n : 1), sizeof(*entries));
  int nfresh = 0;
  if (!fl || !entries) {
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
    e->peer = e->conn.peer = reqs[i].peer;
    e->is_send = e->conn.is_send = reqs[i].is_send;
    e->lane = e->conn.lane = reqs[i].lane;
    e->conn.comm = comm;
    entries[nfresh] = e;
    fl[nfresh++].e = e;
    DCCLCHECKGOTO(choose_transport(comm, e->peer, &e->conn.transport), res, out);
  }
  DCCLCHECKGOTO(setup_round(comm, fl, nfresh, ROUND_SETUP), res, out);
  DCCLCHECKGOTO(connect_round(comm, fl, nfresh), res, out);
  DCCLCHECKGOTO(fall_back(comm, fl, nfresh), res, out);
  pthread_mutex_lock(&comm->conn_lock);
  for (int i = 0; i < nfresh; i++) {
    DCCL_INFO(DCCL_INIT, "connected %s rank %d lane %d via %s", entries[i]->is_send ? "to" : "from", entries[i]->peer,
              entries[i]->lane, entries[i]->conn.transport->name);
    entries[i]->next = atomic_load_explicit(&comm->conns, memory_order_relaxed);
    atomic_store_explicit(&comm->conns, entries[i], memory_order_release);
    entries[i] = NULL;
  }
  pthread_mutex_unlock(&comm->conn_lock);
out:
  if (entries)
    for (int i = 0; i < nfresh; i++)
      if (entries[i]) {
        close_conn(&entries[i]->conn);
        free(entries[i]);
      }
  free(entries);
  free(fl);
  return res;
}
