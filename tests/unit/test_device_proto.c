/* Which protocol device operations speak (collectives/plan.c, device_proto), 4 ranks, float32 and bf16: by default
 * LL for sends, receives and the one-shot all-reduce where no step moves more than DCCL_DEV_LL_BYTES, in the steps
 * bulk would take; bulk for rings, chains and trees, over network links, for one rank and wherever a step is larger.
 * `test_device_proto ll` (DCCL_PROTO=ll): every operation (the double tree's two streams too), in steps of at most
 * DCCL_DEV_LL_BYTES; `test_device_proto bulk`: none. Parameters are read
 * once per process, so each setting is its own run. */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll_comm.h"
#include "collectives/op.h"
#include "pure/dev_conn.h"
#include "unit_check.h"

#define NRANKS 4
#define LL_FLOATS (DCCL_DEV_LL_BYTES / 4)

static struct dccl_coll_comm comm;
static int order[NRANKS];

static int host_proto(const struct dccl_coll_comm *c, int kind, size_t bytes) {
  (void)c, (void)kind, (void)bytes;
  return DCCL_PROTO_BULK;
}

static void comm_init(int nranks) {
  memset(&comm, 0, sizeof(comm));
  comm.nranks = nranks;
  comm.rank = 0;
  comm.pick_proto = host_proto;
  comm.nchannels = 2;
  comm.dev_nchannels = 64;
  for (int i = 0; i < NRANKS; i++) order[i] = i;
  for (int c = 0; c < DCCL_MAX_CHANNELS; c++) {
    comm.rings[c].order = order;
    comm.rings[c].pos = 0;
    comm.rings[c].next = 1 % nranks;
    comm.rings[c].prev = (nranks - 1) % nranks;
  }
}

static void plan(struct dccl_op *op, int kind, int algo, uint64_t count, ncclDataType_t type, size_t esize) {
  memset(op, 0, sizeof(*op));
  op->comm = &comm;
  op->kind = kind;
  op->algo = algo;
  op->count = count;
  op->type = type;
  op->esize = esize;
  op->root = kind == DCCL_OP_BROADCAST || kind == DCCL_OP_REDUCE ? 2 : -1;
  op->peer = kind == DCCL_OP_SEND || kind == DCCL_OP_RECV ? 1 : -1;
  op->on_device = 1;
  op->send_win = op->recv_win = -1;
  dccl_redop_builtin(&op->redop, ncclSum, type, comm.nranks);
  check(dccl_op_plan(op) == ncclSuccess, "plan %s of %llu elements", dccl_op_name(kind), (unsigned long long)count);
}

/* The most elements a step of `op` moves, over its channels and streams. */
static uint64_t largest_step(const struct dccl_op *op) {
  uint64_t most = 0;
  for (int c = 0; c < op->nchannels; c++)
    for (int s = 0; s < 2; s++)
      for (uint64_t i = 0; i < op->ch[c].nsteps[s]; i++) {
        struct dccl_prim_step st;
        dccl_sched_step(&op->ch[c].sched, s, i, &st);
        if (st.nelem > most) most = st.nelem;
      }
  return most;
}

/* Steps of channel 0 had it been planned in chunks of `chunk` elements. */
static uint64_t steps_in_chunks(const struct dccl_op *op, uint64_t chunk) {
  struct dccl_sched s = op->ch[0].sched;
  s.chunk = chunk;
  return dccl_sched_nsteps(&s, 0);
}

struct expect {
  int kind, algo;
  uint64_t count;
  int ll;
  const char *what;
};

static void check_default(void) {
  static const struct expect cases[] = {
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, LL_FLOATS, 1, "a one-shot all-reduce of one LL step"},
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, 2, 1, "an 8-byte one-shot all-reduce"},
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, LL_FLOATS + 1, 0, "a one-shot all-reduce one element over"},
      {DCCL_OP_SEND, DCCL_ALGO_AUTO, 2, 1, "an 8-byte send"},
      {DCCL_OP_RECV, DCCL_ALGO_AUTO, LL_FLOATS, 1, "a receive of one LL step"},
      {DCCL_OP_SEND, DCCL_ALGO_AUTO, LL_FLOATS + 1, 0, "a send one element over"},
      /* Rings, chains and trees stay bulk unless DCCL_PROTO=ll (LL measured slower there). */
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_RING, 2, 0, "an 8-byte ring all-reduce"},
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_TREE, 2, 0, "an 8-byte double tree"},
      {DCCL_OP_BROADCAST, DCCL_ALGO_RING, LL_FLOATS, 0, "a chain broadcast of one LL step"},
      {DCCL_OP_BROADCAST, DCCL_ALGO_TREE, 100, 0, "a tree broadcast"},
      {DCCL_OP_ALLGATHER, DCCL_ALGO_AUTO, LL_FLOATS, 0, "an all-gather of an LL step per rank"},
      {DCCL_OP_REDUCESCATTER, DCCL_ALGO_AUTO, 7, 0, "a 28-byte reduce-scatter"},
  };
  static struct dccl_op op;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct expect *e = &cases[i];
    plan(&op, e->kind, e->algo, e->count, ncclFloat32, 4);
    int ll = op.proto == DCCL_PROTO_LL;
    check(ll == e->ll, "%s: %s, want %s", e->what, ll ? "LL" : "bulk", e->ll ? "LL" : "bulk");
    if (!ll) continue;
    check(largest_step(&op) <= LL_FLOATS, "%s: a step of %llu elements", e->what,
          (unsigned long long)largest_step(&op));
    check(op.ch[0].nsteps[0] == steps_in_chunks(&op, 1 << 20), "%s: %llu steps, bulk's %llu", e->what,
          (unsigned long long)op.ch[0].nsteps[0], (unsigned long long)steps_in_chunks(&op, 1 << 20));
  }
  /* bf16: twice the elements in an LL step. */
  plan(&op, DCCL_OP_SEND, DCCL_ALGO_AUTO, 2 * LL_FLOATS, ncclBfloat16, 2);
  check(op.proto == DCCL_PROTO_LL, "a bf16 send of an LL step speaks LL");
  plan(&op, DCCL_OP_SEND, DCCL_ALGO_AUTO, 2 * LL_FLOATS + 1, ncclBfloat16, 2);
  check(op.proto == DCCL_PROTO_BULK, "a bf16 send one element over speaks bulk");
  /* Network links carry bulk only (the proxy reads each header); one rank has no links. */
  comm.dev_net = 1;
  plan(&op, DCCL_OP_SEND, DCCL_ALGO_AUTO, 2, ncclFloat32, 4);
  check(op.proto == DCCL_PROTO_BULK, "over network links: bulk");
  comm.dev_net = 0;
  comm_init(1);
  plan(&op, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, 2, ncclFloat32, 4);
  check(op.proto == DCCL_PROTO_BULK, "one rank: bulk (a local copy)");
  comm_init(NRANKS);
  /* Host buffers keep the host's choice. */
  memset(&op, 0, sizeof(op));
  op = (struct dccl_op){.comm = &comm, .kind = DCCL_OP_ALLREDUCE, .algo = DCCL_ALGO_RING, .count = 2,
                        .type = ncclFloat32, .esize = 4, .root = -1, .peer = -1, .send_win = -1, .recv_win = -1};
  dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, NRANKS);
  check(dccl_op_plan(&op) == ncclSuccess && op.proto == DCCL_PROTO_BULK, "host buffers: the host's protocol");
}

static void check_forced(int ll) {
  static struct dccl_op op;
  /* Asked for: the ring and the double tree at sizes whose steps fit LL, in bulk's steps. */
  plan(&op, DCCL_OP_ALLREDUCE, DCCL_ALGO_RING, NRANKS * LL_FLOATS, ncclFloat32, 4);
  check((op.proto == DCCL_PROTO_LL) == ll && (!ll || op.ch[0].nsteps[0] == steps_in_chunks(&op, 1 << 20)),
        "a ring all-reduce of an LL step per rank: %s", op.proto == DCCL_PROTO_LL ? "LL" : "bulk");
  plan(&op, DCCL_OP_ALLREDUCE, DCCL_ALGO_TREE, 2 * LL_FLOATS, ncclFloat32, 4);
  check((op.proto == DCCL_PROTO_LL) == ll, "a double tree of an LL step per tree: %s",
        op.proto == DCCL_PROTO_LL ? "LL" : "bulk");
  plan(&op, DCCL_OP_ALLREDUCE, DCCL_ALGO_RING, 1 << 20, ncclFloat32, 4);
  check((op.proto == DCCL_PROTO_LL) == ll, "a 4 MiB ring all-reduce: %s", op.proto == DCCL_PROTO_LL ? "LL" : "bulk");
  if (ll)
    check(largest_step(&op) <= LL_FLOATS && op.ch[0].sched.chunk == LL_FLOATS, "LL steps of at most %u floats (%llu)",
          LL_FLOATS, (unsigned long long)largest_step(&op));
  plan(&op, DCCL_OP_SEND, DCCL_ALGO_AUTO, 1 << 20, ncclFloat32, 4);
  check((op.proto == DCCL_PROTO_LL) == ll, "a 4 MiB send: %s", op.proto == DCCL_PROTO_LL ? "LL" : "bulk");
  plan(&op, DCCL_OP_ALLREDUCE, DCCL_ALGO_TREE, 1 << 20, ncclFloat32, 4);
  check((op.proto == DCCL_PROTO_LL) == ll, "a 4 MiB double tree: %s", op.proto == DCCL_PROTO_LL ? "LL" : "bulk");
  if (ll)
    check(largest_step(&op) <= LL_FLOATS, "the double tree's LL steps (%llu)", (unsigned long long)largest_step(&op));
  plan(&op, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, 2, ncclFloat32, 4);
  check((op.proto == DCCL_PROTO_LL) == ll, "an 8-byte one-shot: %s", op.proto == DCCL_PROTO_LL ? "LL" : "bulk");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (*mode) setenv("DCCL_PROTO", mode, 1);
  comm_init(NRANKS);
  if (!strcmp(mode, "ll"))
    check_forced(1);
  else if (!strcmp(mode, "bulk"))
    check_forced(0);
  else
    check_default();
  printf("test_device_proto %s: %d passed, %d failed\n", mode, checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
