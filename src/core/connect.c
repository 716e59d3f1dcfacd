/* Making connections: choose the transport both ends agree on (the first of the registry that accepts the pair), run
 * setup, swap the info blobs over the bootstrap, connect send sides, then receive sides (a send side's connect never
 * waits for its peer, so no ordering between ranks can deadlock). Transports with a start() confirm readiness in one
 * more exchange, and a transport with a fallback (net_ib -> sockets) is replaced on both ends when either end could not
 * make it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "transports/registry.h"
#include "util/error.h"
#include "util/params.h"

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

static int can_connect(const struct dccl_transport *t, const struct dccl_peer_info *me,
                       const struct dccl_peer_info *them) {
  return t->can_connect(me, them, me->transport_info[t->index], them->transport_info[t->index]);
}

/* Device links a transport that moves the bytes (sockets) carries: kernels fill and drain FIFOs in pinned host
 * memory that the link pump sends. DCCL_DEV_NET=0 turns them off (device buffers between hosts are then refused). */
static int device_net_allowed(const struct dccl_transport *t, int buffers) {
  return buffers != DCCL_BUFFERS_DEVICE || !t->moves_bytes || dccl_param_int(DCCL_PARAM_DEV_NET) == 1;
}

/* The transport DCCL_TRANSPORT names for links of these buffers, or NULL when it leaves them to the default order.
 * "shm" and "staged" both mean through shared host memory: shm for host links, staged for device links, so one
 * setting moves both kinds of buffer through host memory. Another name applies to the links whose buffers its
 * transport carries (ib: host links; p2p: device links; socket: host links, and device links unless DCCL_DEV_NET=0)
 * and leaves the others to the default order; an unknown one is returned, for the caller's error to list the
 * choices. */
static const char *forced_for(const char *forced, int buffers) {
  if (!forced[0]) return NULL;
  if (!strcasecmp(forced, "shm") || !strcasecmp(forced, "staged"))
    return buffers == DCCL_BUFFERS_DEVICE ? "staged" : "shm";
  const struct dccl_transport *t = dccl_transport_find(forced);
  return !t || ((t->buffers & buffers) && device_net_allowed(t, buffers)) ? forced : NULL;
}

/* The transport of a link between ranks `from` and `peer`, or NULL when none reaches. The same answer on both ends:
 * it depends only on the two peer infos, the buffers and the (uniform) environment. Device links (lanes from
 * DCCL_LANE_DEVICE) take only transports that carry device buffers. Quiet: transport_between says why not. */
static const struct dccl_transport *pick_transport(struct dccl_comm *comm, int from, int peer, int buffers) {
  const struct dccl_peer_info *me = &comm->peers[from], *them = &comm->peers[peer];
  const char *forced = forced_for(dccl_param_str(DCCL_PARAM_TRANSPORT), buffers);
  if (forced) {
    const struct dccl_transport *t = dccl_transport_find(forced);
    return t && can_connect(t, me, them) ? t : NULL;
  }
  for (int i = 0; i < dccl_transport_count(); i++) {
    const struct dccl_transport *t = dccl_transport_at(i);
    if ((t->buffers & buffers) && (!t->host_local || me->host_hash == them->host_hash) && can_connect(t, me, them) &&
        device_net_allowed(t, buffers))
      return t;
  }
  return NULL;
}

static ncclResult_t transport_between(struct dccl_comm *comm, int from, int peer, int buffers,
                                      const struct dccl_transport **out) {
  if ((*out = pick_transport(comm, from, peer, buffers))) return ncclSuccess;
  const struct dccl_peer_info *them = &comm->peers[peer];
  const char *forced = forced_for(dccl_param_str(DCCL_PARAM_TRANSPORT), buffers);
  const struct dccl_transport *t = forced ? dccl_transport_find(forced) : NULL;
  if (forced && !t)
    return dccl_error(ncclInvalidArgument, "DCCL_TRANSPORT=%s: this build has %s", forced, dccl_transport_names());
  if (t)
    return dccl_error(ncclInvalidUsage, "DCCL_TRANSPORT=%s, but it cannot reach rank %d (host %s) from rank %d%s",
                      forced, peer, them->hostname, from, t->unreachable);
  if (buffers == DCCL_BUFFERS_DEVICE)
    return dccl_error(ncclInvalidUsage,
                      "device buffers between rank %d and rank %d (host %s): no device transport links them (ranks "
                      "of different hosts move device buffers over the network only with DCCL_DEV_NET=1, the "
                      "default, and DCCL_DEV_NET is %d)",
                      from, peer, them->hostname, (int)dccl_param_int(DCCL_PARAM_DEV_NET));
  return dccl_error(ncclSystemError, "no transport (of %s) reaches rank %d (host %s) from rank %d",
                    dccl_transport_names(), peer, them->hostname, from);
}

static ncclResult_t choose_transport(struct dccl_comm *comm, int peer, int lane, const struct dccl_transport **out) {
  return transport_between(comm, comm->rank, peer, lane >= DCCL_LANE_DEVICE ? DCCL_BUFFERS_DEVICE : DCCL_BUFFERS_HOST,
                           out);
}

int dccl_device_mapping_allowed(void) {
  const char *forced = forced_for(dccl_param_str(DCCL_PARAM_TRANSPORT), DCCL_BUFFERS_DEVICE);
  return !forced || !strcasecmp(forced, "p2p");
}

int dccl_comm_device_links(struct dccl_comm *comm, int *over_network) {
  *over_network = 0;
  for (int a = 0; a < comm->nranks; a++)
    for (int b = a + 1; b < comm->nranks; b++) {
      const struct dccl_transport *t = pick_transport(comm, a, b, DCCL_BUFFERS_DEVICE);
      if (!t) return *over_network = 0; /* no device links at all */
      *over_network |= t->moves_bytes;
    }
  return 1;
}

static uint32_t tag(int round, int lane, int sender_is_send) {
  return DCCL_TAG_CONNECT | ((uint32_t)round << 16) | ((uint32_t)lane << 1) | (uint32_t)sender_is_send;
}
static ncclResult_t send_msg(struct fresh_link *f, int round, size_t bytes) {
  return dccl_bootstrap_send(dccl_comm_of_tctx(f->e->conn.ctx)->bootstrap, f->e->peer,
                             tag(round, f->e->lane, f->e->is_send), &f->mine, bytes);
}
static ncclResult_t recv_msg(struct fresh_link *f, int round, size_t bytes) {
  return dccl_bootstrap_recv(dccl_comm_of_tctx(f->e->conn.ctx)->bootstrap, f->e->peer,
                             tag(round, f->e->lane, !f->e->is_send), &f->theirs, bytes);
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
  if (c->transport) c->transport->close(c);
}

/* The rounds below take the links of one or several communicators at once: every rank sends for all of them
 * before it receives for any, so one thread may make the links of several communicators of one job (a group over
 * communicators from ncclCommInitAll). */

/* Setup on this end, then the blobs both ways. */
static ncclResult_t setup_round(struct fresh_link *fl, int n, int round) {
  for (int i = 0; i < n; i++) {
    struct fresh_link *f = &fl[i];
    memset(&f->mine, 0, sizeof(f->mine));
    DCCLCHECK(note(f, f->e->conn.transport->setup(&f->e->conn, f->mine.info)));
    DCCLCHECK(send_msg(f, round, sizeof(f->mine)));
  }
  for (int i = 0; i < n; i++) DCCLCHECK(recv_msg(&fl[i], round, sizeof(fl[i].theirs)));
  return ncclSuccess;
}

/* Connect send sides first; then, for transports that need it, confirm both ends succeeded. */
static ncclResult_t connect_round(struct fresh_link *fl, int n) {
  for (int i = 0; i < n; i++) fl[i].setup_ok = !fl[i].mine.failed && !fl[i].theirs.failed;
  for (int pass = 1; pass >= 0; pass--)
    for (int i = 0; i < n; i++) {
      struct fresh_link *f = &fl[i];
      if (f->e->is_send != pass || !f->setup_ok) continue;
      DCCLCHECK(note(f, f->e->conn.transport->connect(&f->e->conn, f->theirs.info)));
    }
  int confirming = 0;
  for (int i = 0; i < n; i++)
    if (fl[i].e->conn.transport->confirm_start && fl[i].setup_ok) {
      confirming = 1;
      DCCLCHECK(send_msg(&fl[i], ROUND_CONFIRM, offsetof(struct conn_msg, info)));
    }
  for (int i = 0; i < n && confirming; i++)
    if (fl[i].e->conn.transport->confirm_start && fl[i].setup_ok)
      DCCLCHECK(recv_msg(&fl[i], ROUND_CONFIRM, offsetof(struct conn_msg, info)));
  for (int i = 0; i < n; i++) {
    struct fresh_link *f = &fl[i];
    f->fall_back = f->mine.failed || f->theirs.failed;
    if (!f->fall_back) DCCLCHECK(f->e->conn.transport->start(&f->e->conn));
  }
  return ncclSuccess;
}

/* The links either end could not make switch, on both ends, to the fallback transport. They are made again in a
 * separate array: the caller's array still owns every link. */
static ncclResult_t fall_back(struct fresh_link *fl, int n) {
  int m = 0;
  for (int i = 0; i < n; i++) m += fl[i].fall_back;
  if (m == 0) return ncclSuccess;
  struct fresh_link *fb = calloc((size_t)m, sizeof(*fb));
  if (!fb) return dccl_error(ncclSystemError, "out of memory connecting");
  m = 0;
  for (int i = 0; i < n; i++) {
    struct fresh_link *f = &fl[i];
    if (!f->fall_back) continue;
    struct dccl_conn *c = &f->e->conn;
    const struct dccl_transport_ctx *ctx = c->ctx;
    DCCL_WARN(DCCL_NET, "%s link %s rank %d (host %s) could not be made (%s: %s); using %s", c->transport->name,
              c->is_send ? "to" : "from", c->peer, ctx->peers[c->peer].hostname, f->mine.failed ? "here" : "there",
              f->mine.failed ? f->mine.reason : f->theirs.reason, c->transport->fallback);
    const struct dccl_transport *next = dccl_transport_find(c->transport->fallback);
    if (!next) {
      free(fb);
      return dccl_error(ncclInternalError, "%s falls back to %s, which this build lacks", c->transport->name,
                        c->transport->fallback);
    }
    close_conn(c);
    int peer = c->peer, is_send = c->is_send, lane = c->lane, device = c->device;
    struct dccl_transport_ctx *ctx_keep = c->ctx;
    *c = (struct dccl_conn){
        .transport = next, .ctx = ctx_keep, .peer = peer, .is_send = is_send, .lane = lane, .device = device};
    fb[m++].e = f->e;
  }
  ncclResult_t res = setup_round(fb, m, ROUND_FALLBACK);
  for (int i = 0; i < m && res == ncclSuccess; i++)
    if (fb[i].mine.failed || fb[i].theirs.failed)
      res = dccl_error(ncclSystemError, "connecting to rank %d: the fallback failed too (%s)", fb[i].e->peer,
                       fb[i].mine.failed ? fb[i].mine.reason : fb[i].theirs.reason);
  if (res == ncclSuccess) res = connect_round(fb, m);
  free(fb);
  return res;
}

/* A fresh entry for each wanted link that does not exist yet; *n counts them. */
static ncclResult_t add_fresh(struct dccl_comm *comm, const struct dccl_conn_req *reqs, int nreq, struct fresh_link *fl,
                              int *n) {
  for (int i = 0; i < nreq; i++) {
    if (dccl_comm_find_conn(comm, reqs[i].peer, reqs[i].is_send, reqs[i].lane)) continue;
    struct dccl_conn_entry *e = calloc(1, sizeof(*e));
    if (!e) return dccl_error(ncclSystemError, "out of memory connecting");
    e->peer = e->conn.peer = reqs[i].peer;
    e->is_send = e->conn.is_send = reqs[i].is_send;
    e->lane = e->conn.lane = reqs[i].lane;
    e->conn.device = e->lane >= DCCL_LANE_DEVICE;
    e->conn.ctx = &comm->tctx;
    fl[(*n)++].e = e;
    DCCLCHECK(choose_transport(comm, e->peer, e->lane, &e->conn.transport));
  }
  return ncclSuccess;
}

/* Publishes a made link in its communicator's list (lookups are lock-free: release after the entry is done), and
 * hands a device link a network transport carries to the communicator's pump. */
static ncclResult_t publish(struct dccl_conn_entry *e) {
  struct dccl_comm *comm = dccl_comm_of_tctx(e->conn.ctx);
  DCCL_INFO(DCCL_INIT, "connected %s rank %d lane %d via %s", e->is_send ? "to" : "from", e->peer, e->lane,
            e->conn.transport->name);
  pthread_mutex_lock(&comm->conn_lock);
  e->next = atomic_load_explicit(&comm->conns, memory_order_relaxed);
  atomic_store_explicit(&comm->conns, e, memory_order_release);
  pthread_mutex_unlock(&comm->conn_lock);
  return dccl_comm_pump_link(comm, &e->conn);
}

ncclResult_t dccl_connect_many(const struct dccl_conn_batch *batches, int nbatches) {
  int total = 0, missing = 0; /* the common case, every link already made, allocates nothing */
  for (int b = 0; b < nbatches; b++) {
    total += batches[b].n;
    for (int i = 0; i < batches[b].n && !missing; i++)
      missing = !dccl_comm_find_conn(batches[b].comm, batches[b].reqs[i].peer, batches[b].reqs[i].is_send,
                                     batches[b].reqs[i].lane);
  }
  if (!missing) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  struct fresh_link *fl = calloc((size_t)total, sizeof(*fl));
  int n = 0;
  if (!fl) return dccl_error(ncclSystemError, "out of memory connecting");
  for (int b = 0; b < nbatches; b++)
    DCCLCHECKGOTO(add_fresh(batches[b].comm, batches[b].reqs, batches[b].n, fl, &n), res, out);
  DCCLCHECKGOTO(setup_round(fl, n, ROUND_SETUP), res, out);
  DCCLCHECKGOTO(connect_round(fl, n), res, out);
  DCCLCHECKGOTO(fall_back(fl, n), res, out);
  for (int i = 0; i < n; i++) {
    struct dccl_conn_entry *e = fl[i].e;
    fl[i].e = NULL; /* listed now: the communicator closes it */
    DCCLCHECKGOTO(publish(e), res, out);
  }
out:
  for (int i = 0; i < n; i++)
    if (fl[i].e) {
      close_conn(&fl[i].e->conn);
      free(fl[i].e);
    }
  free(fl);
  return res;
}

ncclResult_t dccl_comm_connect(struct dccl_comm *comm, const struct dccl_conn_req *reqs, int n) {
  struct dccl_conn_batch one = {comm, reqs, n};
  return dccl_connect_many(&one, 1);
}
