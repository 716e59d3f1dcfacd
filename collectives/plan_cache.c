/* The plan cache: a collective's plan and bound connections depend only on (kind, count, type, root, the
 * reduction named, whether the buffers lie in windows) and the communicator (the reduction: a per-rank premultiply rules out the direct all-reduce), so an application that repeats a call (every training step does) plans it once. Each entry is a
 * copy of a planned, bound op; a hit copies its channels into the new op, skipping planning, the cost model and
 * the connection lookups. Connections live as long as the communicator, so cached pointers stay valid. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/op.h"

#define PLAN_CACHE_ENTRIES 8

struct plan_entry {
  int kind, root, algo, proto, nchannels, on_device, called;
  int in_windows; /* both buffers in mapped windows: the direct all-reduce across processes */
  size_t count;
  ncclDataType_t type;
  struct dccl_op_channel ch[]; /* nchannels */
};

struct dccl_plan_cache {
  struct plan_entry *entry[PLAN_CACHE_ENTRIES];
  int next_victim; /* round robin */
};

static int cacheable(const struct dccl_op *op) {
  return op->kind != DCCL_OP_SEND && op->kind != DCCL_OP_RECV;
}

int dccl_plan_cache_get(struct dccl_op *op) {
  struct dccl_plan_cache *c = op->comm->plan_cache;
  if (!c || !cacheable(op)) return 0;
  for (int i = 0; i < PLAN_CACHE_ENTRIES; i++) {
    const struct plan_entry *e = c->entry[i];
    if (!e || e->kind != op->kind || e->count != op->count || e->type != op->type || e->root != op->root ||
        e->on_device != op->on_device || e->called != op->redop.called || e->in_windows != dccl_op_in_windows(op))
      continue;
    op->algo = e->algo;
    op->proto = e->proto;
    op->nchannels = e->nchannels;
    memcpy(op->ch, e->ch, (size_t)e->nchannels * sizeof(e->ch[0]));
    op->bound = 1;
    return 1;
  }
  return 0;
}

void dccl_plan_cache_put(const struct dccl_op *op) {
  struct dccl_coll_comm *comm = op->comm;
  if (!cacheable(op) || !op->bound) return;
  if (!comm->plan_cache && !(comm->plan_cache = calloc(1, sizeof(struct dccl_plan_cache)))) return;
  struct dccl_plan_cache *c = comm->plan_cache;
  /* Entries are made once, at full size, and overwritten: a job cycling through more shapes than the cache holds
   * replans but allocates nothing. */
  struct plan_entry *e = c->entry[c->next_victim];
  if (!e) e = malloc(sizeof(*e) + DCCL_MAX_CHANNELS * sizeof(e->ch[0]));
  if (!e) return; /* a cache that cannot grow just misses */
  c->entry[c->next_victim] = e;
  e->kind = op->kind;
  e->on_device = op->on_device;
  e->called = op->redop.called;
  e->in_windows = dccl_op_in_windows(op);
  e->root = op->root;
  e->algo = op->algo;
  e->proto = op->proto;
  e->nchannels = op->nchannels;
  e->count = op->count;
  e->type = op->type;
  memcpy(e->ch, op->ch, (size_t)op->nchannels * sizeof(e->ch[0])); /* not yet run: every done[] is 0 */
  c->next_victim = (c->next_victim + 1) % PLAN_CACHE_ENTRIES;
}

void dccl_plan_cache_free(struct dccl_coll_comm *comm) {
  struct dccl_plan_cache *c = comm->plan_cache;
  if (!c) return;
  for (int i = 0; i < PLAN_CACHE_ENTRIES; i++) free(c->entry[i]);
  free(c);
  comm->plan_cache = NULL;
}
