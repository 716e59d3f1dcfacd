/* What stall reports judge (core/stall_verdict.h). */
#include "core/stall_verdict.h"

#include <stdio.h>
#include <string.h>

#include "collectives/op.h"

static struct dccl_slot_header call_of(const struct dccl_stall_status *s) {
  return (struct dccl_slot_header){.seq = s->seq, .kind = s->kind, .count = s->count, .what = s->what,
                                   .root = s->root};
}

void dccl_stall_describe(const struct dccl_stall_status *s, char *out, size_t len) {
  if (s->in_call < 0) {
    snprintf(out, len, "rank %d: no answer", s->rank);
    return;
  }
  if (!s->in_call) {
    snprintf(out, len, "rank %d: not waiting in an operation (its next collective is #%llu)", s->rank,
             (unsigned long long)s->next_seq);
    return;
  }
  struct dccl_slot_header h = call_of(s);
  char call[96];
  dccl_describe_call(&h, call, sizeof(call));
  if (s->on_device == 2) {
    snprintf(out, len, "rank %d: in %s #%llu with %s, waiting %llu ms for rank %d in the meeting before its kernels",
             s->rank, dccl_op_name((int)s->kind), (unsigned long long)s->seq, call, (unsigned long long)s->stalled_ms,
             s->waiting_on);
    return;
  }
  if (s->on_device) {
    snprintf(out, len, "rank %d: in %s #%llu with %s, in kernels that have made no progress for %llu ms", s->rank,
             dccl_op_name((int)s->kind), (unsigned long long)s->seq, call, (unsigned long long)s->stalled_ms);
    return;
  }
  snprintf(out, len, "rank %d: in %s #%llu with %s, waiting %llu ms for rank %d", s->rank,
           dccl_op_name((int)s->kind),
           (unsigned long long)s->seq, call, (unsigned long long)s->stalled_ms, s->waiting_on);
}

static int is_collective(const struct dccl_stall_status *s) {
  return s->in_call == 1 && s->kind != DCCL_OP_SEND && s->kind != DCCL_OP_RECV;
}

int dccl_stall_contradiction(const struct dccl_stall_status *all, int n, struct dccl_stall_status pair[2]) {
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      const struct dccl_stall_status *x = &all[a], *y = &all[b];
      if (!is_collective(x) || !is_collective(y) || x->seq != y->seq) continue;
      /* the same call met by one rank, not by the other */
      int unmet = (x->on_device == 2 && y->on_device == 1) || (x->on_device == 1 && y->on_device == 2);
      if (x->kind != y->kind || x->count != y->count || x->what != y->what || x->root != y->root || unmet) {
        pair[0] = *x;
        pair[1] = *y;
        pair[0].seen_by = pair[1].seen_by = -1;
        return 1;
      }
    }
  return 0;
}

void dccl_stall_verdict_text(const struct dccl_stall_status p[2], char *text, size_t len) {
  struct dccl_slot_header a = call_of(&p[0]), b = call_of(&p[1]);
  char ca[96], cb[96], how[48];
  dccl_describe_call(&a, ca, sizeof(ca));
  dccl_describe_call(&b, cb, sizeof(cb));
  if (p[0].seen_by < 0)
    snprintf(how, sizeof(how), "found by the stall report");
  else
    snprintf(how, sizeof(how), "seen by rank %d", p[0].seen_by);
  int p2p = (p[0].kind == DCCL_OP_SEND && p[1].kind == DCCL_OP_RECV) ||
            (p[0].kind == DCCL_OP_RECV && p[1].kind == DCCL_OP_SEND);
  const struct dccl_stall_status *s = p[0].kind == DCCL_OP_SEND ? &p[0] : &p[1], *r = s == &p[0] ? &p[1] : &p[0];
  if (p2p)
    snprintf(text, len,
             "mismatched calls (%s): rank %d called ncclSend #%llu to rank %d with %s, rank %d ncclRecv from rank %d "
             "with %s (a send and its receive must move the same bytes)",
             how, s->rank, (unsigned long long)s->seq, r->rank, s == &p[0] ? ca : cb, r->rank, s->rank,
             s == &p[0] ? cb : ca);
  else if (p[0].kind != p[1].kind || p[0].seq != p[1].seq)
    snprintf(text, len,
             "mismatched operations (%s): rank %d is in %s #%llu while rank %d is in %s #%llu (the ranks must call the "
             "same collectives in the same order)",
             how, p[0].rank, dccl_op_name((int)p[0].kind), (unsigned long long)p[0].seq, p[1].rank,
             dccl_op_name((int)p[1].kind), (unsigned long long)p[1].seq);
  else if (!strcmp(ca, cb) && p[0].on_device + p[1].on_device == 3)
    snprintf(text, len,
             "mismatched buffers (%s): in %s #%llu with %s rank %d waits in the ranks' meeting while rank %d's kernels "
             "run without it: where one rank passes buffers registered with ncclCommRegister (or in windows), every "
             "rank must",
             how, dccl_op_name((int)p[0].kind), (unsigned long long)p[0].seq, ca,
             p[0].on_device == 2 ? p[0].rank : p[1].rank, p[0].on_device == 2 ? p[1].rank : p[0].rank);
  else
    snprintf(text, len,
             "mismatched calls (%s): rank %d called %s #%llu with %s, rank %d with %s (every rank must pass the same "
             "count, datatype, reduction and root)",
             how, p[0].rank, dccl_op_name((int)p[0].kind), (unsigned long long)p[0].seq, ca, p[1].rank, cb);
}

int dccl_stall_same_collective(const struct dccl_stall_status p[2]) {
  return is_collective(&p[0]) && is_collective(&p[1]) && p[0].seq == p[1].seq;
}
