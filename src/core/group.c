#include "core/group.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static __thread int group_depth;
static __thread struct dccl_op *group_head, *group_tail;
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

static ncclResult_t run_inits(void) {
  int n = ninits;
  ninits = 0;
  return n ? dccl_init_many(inits, n) : ncclSuccess;
}

/* One finished op kept per thread: back-to-back calls (the common case) then allocate nothing. A thread-specific
 * key frees it when its thread exits (the key's value only marks the thread as having one). */
static __thread struct dccl_op *spare_op;
static __thread int spare_registered;
static pthread_key_t spare_key;
static pthread_once_t spare_key_once = PTHREAD_ONCE_INIT;
static int spare_key_made;

static void spare_release(void *unused) {
  (void)unused;
  free(spare_op);
  spare_op = NULL;
}

static void spare_key_create(void) {
  spare_key_made = pthread_key_create(&spare_key, spare_release) == 0;
}

/* Unloading the library must not leave threads a destructor in unmapped code. */
__attribute__((destructor)) static void spare_key_drop(void) {
  if (spare_key_made) pthread_key_delete(spare_key);
}

static void keep_spare(struct dccl_op *op) {
  if (!spare_registered) {
    pthread_once(&spare_key_once, spare_key_create);
    if (!spare_key_made || pthread_setspecific(spare_key, &spare_registered) != 0) {
      free(op); /* no way to free it at thread exit: keep none */
      return;
    }
    spare_registered = 1;
  }
  spare_op = op;
}

struct dccl_op *dccl_op_new(void) {
  struct dccl_op *op = spare_op ? spare_op : malloc(sizeof(*op));
  spare_op = NULL;
  if (op) memset(op, 0, offsetof(struct dccl_op, ch)); /* planning clears each channel it uses */
  return op;
}

static void free_ops(struct dccl_op *op) {
  while (op) {
    struct dccl_op *next = op->next;
    if (!spare_op)
      keep_spare(op);
    else
      free(op);
    op = next;
  }
}

/* Sends to and receives from oneself pair up in order within a group and are plain copies. */
static ncclResult_t match_self(struct dccl_op **ops, int n) {
  for (int i = 0; i < n; i++) {
    struct dccl_op *s = ops[i];
    if (s->done || s->kind != DCCL_OP_SEND || s->peer != s->comm->rank) continue;
    struct dccl_op *r = NULL;
    for (int j = 0; j < n && !r; j++)
      if (!ops[j]->done && ops[j]->kind == DCCL_OP_RECV && ops[j]->comm == s->comm && ops[j]->peer == s->comm->rank)
        r = ops[j];
    if (!r)
      return dccl_error(ncclInvalidUsage, "ncclSend to self (rank %d) without a matching ncclRecv in the same group",
                        s->comm->rank);
    if (r->count * r->esize != s->count * s->esize)
      return dccl_error(ncclInvalidUsage, "ncclSend to self of %zu bytes, but ncclRecv from self of %zu bytes",
                        s->count * s->esize, r->count * r->esize);
    if (s->count) memmove(r->recvbuff, s->sendbuff, s->count * s->esize);
    s->done = r->done = 1;
  }
  for (int i = 0; i < n; i++)
    if (!ops[i]->done && ops[i]->kind == DCCL_OP_RECV && ops[i]->peer == ops[i]->comm->rank)
      return dccl_error(ncclInvalidUsage, "ncclRecv from self (rank %d) without a matching ncclSend in the same group",
                        ops[i]->comm->rank);
  return ncclSuccess;
}

/* Operations sharing connections run in issue order: a comm's collectives one after the other, and the
 * point-to-point operations of one (peer, direction) one after the other. */
static void chain_ops(struct dccl_op **ops, int n) {
  for (int i = 0; i < n; i++) {
    ops[i]->after = NULL;
    for (int j = i - 1; j >= 0; j--) {
      struct dccl_op *a = ops[i], *b = ops[j];
      if (a->comm != b->comm) continue;
      int a_p2p = a->kind == DCCL_OP_SEND || a->kind == DCCL_OP_RECV;
      int b_p2p = b->kind == DCCL_OP_SEND || b->kind == DCCL_OP_RECV;
      if ((!a_p2p && !b_p2p) || (a_p2p && a->kind == b->kind && a->peer == b->peer)) {
        a->after = b;
        break;
      }
    }
  }
}

/* Connects what the ops need, for every communicator of the group in one go (so one thread may drive several
 * communicators of a job, each waiting on links the others make). */
static ncclResult_t connect_ops(struct dccl_op **ops, int n) {
  ncclResult_t res = ncclSuccess;
  int nb = 0, nreq = 0;
  if (n <= 0) return ncclSuccess;
  struct dccl_conn_batch *batches = calloc((size_t)n, sizeof(*batches)); /* one per communicator */
  if (!batches) return dccl_error(ncclSystemError, "out of memory");
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = ops[j]->comm == ops[i]->comm;
    if (seen) continue;
    struct dccl_conn_req *reqs = NULL;
    int cap = 0, nr = 0;
    for (int j = i; j < n && res == ncclSuccess; j++)
      if (ops[j]->comm == ops[i]->comm && !ops[j]->done && !ops[j]->bound)
        res = dccl_op_conn_reqs(ops[j], &reqs, &nr, &cap);
    batches[nb++] = (struct dccl_conn_batch){dccl_comm_of_coll(ops[i]->comm), reqs, nr};
    nreq += nr;
  }
  if (res == ncclSuccess && nreq) res = dccl_connect_many(batches, nb);
  for (int b = 0; b < nb; b++) free((void *)batches[b].reqs);
  free(batches);
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    if (ops[i]->done || ops[i]->bound) continue;
    res = dccl_op_bind(ops[i]);
    if (res == ncclSuccess) dccl_plan_cache_put(ops[i]);
  }
  return res;
}

static ncclResult_t run_ops(struct dccl_op *head) {
  int n = 0;
  for (struct dccl_op *op = head; op; op = op->next) n++;
  if (n == 0) return ncclSuccess;
  /* The common case, one collective whose plan came from the cache: nothing to match, order or connect. */
  if (n == 1 && head->bound) return dccl_exec_ops(&head, 1);
  struct dccl_op *few[16];
  struct dccl_op **ops = n <= 16 ? few : malloc((size_t)n * sizeof(*ops));
  if (!ops) return dccl_error(ncclSystemError, "out of memory");
  n = 0;
  for (struct dccl_op *op = head; op; op = op->next) ops[n++] = op;
  ncclResult_t res = match_self(ops, n);
  if (res == ncclSuccess) {
    chain_ops(ops, n);
    res = connect_ops(ops, n);
    /* A link that failed half-way leaves peers waiting on it: the communicator cannot be used again. */
    if (res != ncclSuccess) {
      char text[512], what[96];
      snprintf(what, sizeof(what), "connecting for %s", dccl_op_name(ops[0]->kind));
      res = dccl_comm_explain_failure(dccl_comm_of_coll(ops[0]->comm), res, what, -1);
      snprintf(text, sizeof(text), "%s", dccl_last_error());
      for (int i = 0; i < n; i++)
        if (!ops[i]->done) dccl_comm_set_failed(dccl_comm_of_coll(ops[i]->comm), res, text);
    }
  }
  if (res == ncclSuccess) res = dccl_exec_ops(ops, n);
  if (ops != few) free(ops);
  return res;
}

ncclResult_t dccl_group_enqueue(struct dccl_op *op) {
  op->next = NULL;
  if (group_depth == 0) {
    ncclResult_t res = run_ops(op);
    free_ops(op);
    return res;
  }
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
  if (res == ncclSuccess) res = run_ops(head);
  free_ops(head);
  return res;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  (void)simInfo;
  return dccl_error(ncclInvalidUsage, "ncclGroupSimulateEnd is not supported by DCCL yet");
}
