#include "core/group.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/device/dev_exec.h"
#include "core/comm_init.h"
#include "tune/tune.h"
#include "util/error.h"

/* Read on every call: the initial-exec model reaches them without a __tls_get_addr call (a few bytes of the static
 * TLS block, which a library loaded at start-up or preloaded always has). */
static __thread __attribute__((tls_model("initial-exec"))) int group_depth;
static __thread __attribute__((tls_model("initial-exec"))) struct dccl_op *group_head, *group_tail;
static __thread struct dccl_init_req *inits;
static __thread int ninits, inits_cap;

int dccl_group_depth(void) {
  return group_depth;
}

ncclResult_t dccl_group_defer_init(const struct dccl_init_req *req) {
  if (ninits == inits_cap) {
    int ncap = inits_cap ? inits_cap * 2 : 4;
    struct dccl_init_req *n = realloc(inits, (size_t)ncap * sizeof(*n));
    if (!n) return dccl_error(ncclSystemError, "out of memory");
    inits = n;
    inits_cap = ncap;
  }
  inits[ninits++] = *req;
  return ncclSuccess;
}

/* Nonblocking creations start in the background first (blocking ones of the same job may wait for them), then
 * the blocking ones run together, one thread each. */
static ncclResult_t run_inits(void) {
  int n = ninits, nblocking = 0, started = 0;
  ncclResult_t res = ncclSuccess;
  ninits = 0;
  for (int i = 0; i < n; i++) {
    if (inits[i].config.cfg.blocking != 0) {
      inits[nblocking++] = inits[i];
      continue;
    }
    ncclResult_t r = dccl_comm_init_async(&inits[i]);
    if (r == ncclInProgress) started = 1;
    else if (res == ncclSuccess) res = r;
  }
  if (nblocking) {
    ncclResult_t r = dccl_init_many(inits, nblocking);
    if (res == ncclSuccess) res = r;
  }
  return res == ncclSuccess && started ? ncclInProgress : res;
}

static void put_ops(struct dccl_op *op) {
  while (op) {
    struct dccl_op *next = op->next;
    dccl_op_put(op);
    op = next;
  }
}

/* Sends to and receives from oneself pair up in order within a group and are plain copies. */
static ncclResult_t match_self(struct dccl_op *head) {
  for (struct dccl_op *s = head; s; s = s->next) {
    if (s->finished || s->kind != DCCL_OP_SEND || s->peer != s->comm->rank) continue;
    struct dccl_op *r = NULL;
    for (struct dccl_op *o = head; o && !r; o = o->next)
      if (!o->finished && o->kind == DCCL_OP_RECV && o->comm == s->comm && o->peer == s->comm->rank) r = o;
    if (!r)
      return dccl_error(ncclInvalidUsage, "ncclSend to self (rank %d) without a matching ncclRecv in the same group",
                        s->comm->rank);
    if (r->count * r->esize != s->count * s->esize)
      return dccl_error(ncclInvalidUsage, "ncclSend to self of %zu bytes, but ncclRecv from self of %zu bytes",
                        s->count * s->esize, r->count * r->esize);
    if (s->on_device != r->on_device)
      return dccl_error(ncclInvalidUsage, "ncclSend to self and ncclRecv from self: one has GPU buffers, one host");
    ncclResult_t res = ncclSuccess;
    if (s->count && s->on_device)
      res = dccl_dev_copy(s->comm, r->recvbuff, s->sendbuff, s->count * s->esize, s->stream);
    else if (s->count)
      memmove(r->recvbuff, s->sendbuff, s->count * s->esize);
    if (res != ncclSuccess) return res;
    s->finished = r->finished = 1;
  }
  for (struct dccl_op *o = head; o; o = o->next)
    if (!o->finished && o->kind == DCCL_OP_RECV && o->peer == o->comm->rank)
      return dccl_error(ncclInvalidUsage, "ncclRecv from self (rank %d) without a matching ncclSend in the same group",
                        o->comm->rank);
  return ncclSuccess;
}

/* Whether an earlier op of the list has the same communicator (so this one's was handled with it). */
static int comm_seen_before(const struct dccl_op *head, const struct dccl_op *op) {
  for (const struct dccl_op *o = head; o != op; o = o->next)
    if (o->comm == op->comm) return 1;
  return 0;
}

/* Makes the links that ops need and do not have yet, for every communicator of the group in one go (so one thread
 * may drive several communicators of a job, each waiting on links the others make). Ops whose links all exist
 * (every collective, and send/recv after their first use) allocate nothing here. */
static ncclResult_t connect_ops(struct dccl_op *head) {
  int nb = 0, nreq = 0, ncomms = 0;
  for (struct dccl_op *op = head; op; op = op->next) {
    if (!op->finished && !op->bound && dccl_op_try_bind(op)) dccl_plan_cache_put(op);
    if (!op->finished && !op->bound) nreq++;
    ncomms += !comm_seen_before(head, op);
  }
  if (nreq == 0) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  struct dccl_conn_batch *batches = calloc((size_t)ncomms, sizeof(*batches)); /* one per communicator */
  if (!batches) return dccl_error(ncclSystemError, "out of memory");
  nreq = 0;
  for (struct dccl_op *op = head; op && res == ncclSuccess; op = op->next) {
    if (comm_seen_before(head, op)) continue;
    struct dccl_conn_req *reqs = NULL;
    int cap = 0, nr = 0;
    for (struct dccl_op *o = op; o && res == ncclSuccess; o = o->next)
      if (o->comm == op->comm && !o->finished && !o->bound) res = dccl_op_conn_reqs(o, &reqs, &nr, &cap);
    batches[nb++] = (struct dccl_conn_batch){dccl_comm_of_coll(op->comm), reqs, nr};
    nreq += nr;
  }
  if (res == ncclSuccess && nreq) res = dccl_connect_many(batches, nb);
  for (int b = 0; b < nb; b++) free((void *)batches[b].reqs);
  free(batches);
  for (struct dccl_op *op = head; op && res == ncclSuccess; op = op->next) {
    if (op->finished || op->bound) continue;
    res = dccl_op_bind(op);
    if (res == ncclSuccess) dccl_plan_cache_put(op);
  }
  return res;
}

/* A link that failed half-way leaves peers waiting on it: the communicators cannot be used again. */
static ncclResult_t connect_failed(struct dccl_op *head, ncclResult_t res) {
  char text[512], what[96];
  snprintf(what, sizeof(what), "connecting for %s", dccl_op_name(head->kind));
  res = dccl_comm_explain_failure(dccl_comm_of_coll(head->comm), res, what, -1);
  snprintf(text, sizeof(text), "%s", dccl_last_error());
  for (struct dccl_op *op = head; op; op = op->next)
    if (!op->finished) dccl_comm_set_failed(dccl_comm_of_coll(op->comm), res, text);
  return res;
}

/* Posts the group's ops and waits for those of blocking communicators; a nonblocking communicator's progress
 * thread owns its ops once posted (they are released when done), and the call returns ncclInProgress. Takes
 * ownership of the list. */
static ncclResult_t post_and_wait(struct dccl_op *head) {
  if (head && !head->finished && dccl_op_runs_alone(head)) {
    ncclResult_t res = dccl_op_run_alone(head);
    dccl_op_put(head);
    return res;
  }
  struct dccl_op *waited = NULL, **wtail = &waited, *finished = NULL;
  int detached = 0;
  for (struct dccl_op *op = head, *next; op; op = next) {
    next = op->next;
    op->next = NULL;
    if (op->finished) { /* matched with itself */
      op->next = finished;
      finished = op;
      continue;
    }
    if (op->comm->queue.progress_thread) {
      op->detached = 1;
      detached = 1;
    } else {
      *wtail = op;
      wtail = &op->next;
    }
    dccl_op_post(op); /* a detached op may be done and reused from here on */
  }
  ncclResult_t res = dccl_ops_wait(waited);
  put_ops(waited);
  put_ops(finished);
  return res == ncclSuccess && detached ? ncclInProgress : res;
}

/* After a launch of `comm`'s: a pump moving its network links hears of it, and so does the monitor thread that
 * notes stalled kernels. */
static void note_launch(struct dccl_coll_comm *comm) {
  dccl_comm_pump_launched(dccl_comm_of_coll(comm));
  dccl_stall_launched(dccl_comm_of_coll(comm));
}

/* One kernel for `comm`'s device operations in `list`. */
static ncclResult_t launch(struct dccl_coll_comm *comm, struct dccl_op *list, void *stream) {
  ncclResult_t res = dccl_dev_launch(comm, list, stream);
  note_launch(comm);
  return res;
}

/* Launches the group's device operations, one kernel per communicator on its operations' stream (or one for
 * several ranks of this process on one GPU: dccl_dev_launch_ranks), and takes them out of the list (the kernels'
 * work holds what they need). Returns at once. */
static ncclResult_t launch_device_ops(struct dccl_op **head) {
  ncclResult_t res = ncclSuccess;
  /* Sends to oneself were copied already (match_self): they are not part of the kernel. */
  int ncomms = 0;
  for (struct dccl_op **p = head; *p;) {
    struct dccl_op *op = *p;
    if (op->on_device && op->finished) {
      *p = op->next;
      dccl_op_put(op);
    } else {
      ncomms += op->on_device && !comm_seen_before(*head, op);
      p = &op->next;
    }
  }
  struct dccl_coll_comm **comms = ncomms ? malloc((size_t)ncomms * sizeof(*comms)) : NULL;
  void **streams = ncomms ? malloc((size_t)ncomms * sizeof(*streams)) : NULL;
  if (ncomms && (!comms || !streams)) res = dccl_error(ncclSystemError, "out of memory");
  int n = 0;
  for (struct dccl_op *op = *head; op && res == ncclSuccess; op = op->next) {
    if (!op->on_device || comm_seen_before(*head, op)) continue;
    for (struct dccl_op *o = op->next; o && res == ncclSuccess; o = o->next)
      if (o->on_device && o->comm == op->comm && o->stream != op->stream)
        res = dccl_error(ncclInvalidUsage,
                         "%s and %s of one communicator in one group are on different streams: DCCL launches a "
                         "group's device operations of a communicator as one kernel on one stream",
                         dccl_op_name(op->kind), dccl_op_name(o->kind));
    comms[n] = op->comm;
    streams[n++] = op->stream;
  }
  if (res == ncclSuccess && n) {
    res = dccl_dev_launch_ranks(comms, streams, n, *head);
    for (int i = 0; i < n; i++) note_launch(comms[i]);
  }
  free(comms);
  free(streams);
  for (struct dccl_op **p = head; *p;) {
    struct dccl_op *op = *p;
    if (!op->on_device) {
      p = &op->next;
      continue;
    }
    *p = op->next;
    dccl_op_put(op);
  }
  return res;
}

static ncclResult_t run_ops(struct dccl_op *head) {
  if (!head) return ncclSuccess;
  /* The common case, one collective whose plan came from the cache: nothing to match or connect. */
  if (!head->next && head->bound) {
    if (!head->on_device) return post_and_wait(head);
    ncclResult_t res = launch(head->comm, head, head->stream);
    dccl_op_put(head);
    return res;
  }
  ncclResult_t res = match_self(head);
  if (res == ncclSuccess) {
    res = connect_ops(head);
    if (res != ncclSuccess) res = connect_failed(head, res);
  }
  if (res == ncclSuccess) res = launch_device_ops(&head);
  if (res != ncclSuccess) {
    put_ops(head);
    return res;
  }
  return post_and_wait(head);
}

ncclResult_t dccl_group_run_now(struct dccl_op *head) { return run_ops(head); }

struct dccl_op *dccl_group_last(void) { return group_tail; }

void dccl_group_drop_after(struct dccl_op *mark) {
  put_ops(mark ? mark->next : group_head);
  if (mark) mark->next = NULL;
  else group_head = NULL;
  group_tail = mark;
}

void dccl_group_drop_comm(const struct dccl_coll_comm *comm) {
  struct dccl_op *op = group_head;
  group_head = group_tail = NULL;
  while (op) {
    struct dccl_op *next = op->next;
    op->next = NULL;
    if (op->comm == comm) {
      dccl_op_put(op);
    } else {
      if (group_tail) group_tail->next = op;
      else group_head = op;
      group_tail = op;
    }
    op = next;
  }
}

ncclResult_t dccl_group_enqueue(struct dccl_op *op) {
  op->next = NULL;
  if (group_depth == 0) return run_ops(op);
  if (group_tail)
    group_tail->next = op;
  else
    group_head = op;
  group_tail = op;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth == 0) return dccl_error(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return ncclSuccess;
  struct dccl_op *head = group_head;
  group_head = group_tail = NULL;
  ncclResult_t res = run_inits();
  if (res != ncclSuccess && res != ncclInProgress) {
    put_ops(head);
    return res;
  }
  ncclResult_t ops = run_ops(head);
  return ops != ncclSuccess ? ops : res;
}

/* Ends the group without running its operations (communicator creations in it do run) and says how long they
 * would take, in microseconds, from the cost model: each operation as the all-reduce of its bytes on the algorithm
 * the model picks for that size (the model knows the all-reduce, which bounds the others: they move at most its
 * bytes over the same links), a communicator's operations one after the other, communicators side by side. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  if (!simInfo) return dccl_error(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL");
  if (simInfo->magic != NCCL_SIM_INFO_MAGIC || simInfo->size < sizeof(ncclSimInfo_t))
    return dccl_error(ncclInvalidArgument,
                      "ncclGroupSimulateEnd: simInfo is not initialised (magic 0x%x, size %zu: use "
                      "NCCL_SIM_INFO_INITIALIZER)",
                      simInfo->magic, simInfo->size);
  if (group_depth == 0) return dccl_error(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  double longest_ns = 0;
  if (--group_depth == 0) {
    struct dccl_op *head = group_head;
    group_head = group_tail = NULL;
    ncclResult_t res = run_inits();
    for (struct dccl_op *op = head; op; op = op->next) {
      int first = 1; /* the first op of its communicator in the list sums that communicator's ops */
      for (struct dccl_op *p = head; p != op && first; p = p->next) first = p->comm != op->comm;
      if (!first) continue;
      double ns = 0;
      for (struct dccl_op *p = op; p; p = p->next) {
        if (p->comm != op->comm) continue;
        size_t bytes = p->count * p->esize;
        ns += dccl_tune_predict_ns(p->comm, dccl_tune_algo(p->comm, DCCL_OP_ALLREDUCE, bytes), bytes);
      }
      if (ns > longest_ns) longest_ns = ns;
    }
    put_ops(head);
    if (res != ncclSuccess && res != ncclInProgress) return res;
  }
  simInfo->estimatedTime = (float)(longest_ns / 1000.0);
  return ncclSuccess;
}
