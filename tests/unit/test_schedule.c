/* Runs every schedule for 1..9 ranks inside one process: N fake communicators joined by in-memory FIFOs, all
 * driven by one call to the real executor, checked against a directly computed result. This tests the schedule
 * math, the planner and the executor without processes or transports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/op.h"
#include "core/comm.h"
#include "topo/ring_order.h"
#include "transports/registry.h"
#include "util/params.h"

static int passed, failed;
#define CHECK(cond, ...)                   \
  do {                                     \
    if (cond) {                            \
      passed++;                            \
    } else {                               \
      failed++;                            \
      printf("FAIL: " __VA_ARGS__);        \
      printf("\n");                        \
    }                                      \
  } while (0)

/* Links are FIFOs in this process's memory, so the executor moves every byte itself (no progress to call). The
 * table is completed like a registered one: the ops it does not name are the registry's defaults. */
static int mem_can_connect(const struct dccl_peer_info *a, const struct dccl_peer_info *b, const void *x,
                           const void *y) {
  return 1;
}
static ncclResult_t mem_setup(struct dccl_conn *c, void *info) { return ncclSuccess; }
static ncclResult_t mem_connect(struct dccl_conn *c, const void *info) { return ncclSuccess; }
static const struct dccl_transport mem_provider = {.size = sizeof(struct dccl_transport),
                                                   .name = "mem",
                                                   .can_connect = mem_can_connect,
                                                   .setup = mem_setup,
                                                   .connect = mem_connect};
static struct dccl_transport mem_transport;

/* A FIFO shared by the two ends of each directed link, made on first request. */
struct link {
  int from, to, lane;
  void *fifo;
  struct dccl_conn_desc desc;
};
static struct link links[4096];
static int nlinks;

/* Binds conn to the FIFO of link (from, to, lane), with LL as shm offers it. */
static void bind_link(struct dccl_conn *conn, int from, int to, int lane) {
  struct link *l = NULL;
  for (int i = 0; i < nlinks && !l; i++)
    if (links[i].from == from && links[i].to == to && links[i].lane == lane) l = &links[i];
  if (!l) {
    uint32_t nslots = (uint32_t)dccl_param_int(DCCL_PARAM_NSLOTS);
    uint64_t slot = (uint64_t)dccl_param_int(DCCL_PARAM_CHUNK_SIZE);
    l = &links[nlinks++];
    *l = (struct link){.from = from, .to = to, .lane = lane};
    uint64_t bytes = dccl_conn_desc_layout(&l->desc, nslots, slot, DCCL_LL_MAX_BYTES, DCCL_REGION_RECV);
    l->fifo = aligned_alloc(128, (bytes + 127) & ~(uint64_t)127);
    dccl_fifo_init(l->fifo, &l->desc);
  }
  CHECK(dccl_conn_bind(conn, &l->desc, l->fifo, l->fifo) == ncclSuccess, "bind");
}

/* Real connection setup needs both ends to ask for a link: every request must have its mirror at the peer. */
static int has_mirror(struct dccl_op *peer_op, int rank, int is_send, int lane) {
  struct dccl_conn_req *reqs = NULL;
  int nreq = 0, cap = 0, found = 0;
  dccl_op_conn_reqs(peer_op, &reqs, &nreq, &cap);
  for (int i = 0; i < nreq; i++)
    found |= reqs[i].peer == rank && reqs[i].is_send == !is_send && reqs[i].lane == lane;
  free(reqs);
  return found;
}

static void connect_all(struct dccl_comm *comms, struct dccl_op **ops, int n) {
  for (int r = 0; r < n; r++) {
    struct dccl_conn_req *reqs = NULL;
    int nreq = 0, cap = 0;
    dccl_op_conn_reqs(ops[r], &reqs, &nreq, &cap);
    for (int i = 0; i < nreq; i++) {
      CHECK(reqs[i].peer != r && reqs[i].peer >= 0 && reqs[i].peer < n &&
                has_mirror(ops[reqs[i].peer], r, reqs[i].is_send, reqs[i].lane),
            "%s: rank %d asks for a link %s rank %d (lane %d) that the peer does not ask for",
            dccl_op_name(ops[r]->kind), r, reqs[i].is_send ? "to" : "from", reqs[i].peer, reqs[i].lane);
      if (dccl_comm_find_conn(&comms[r], reqs[i].peer, reqs[i].is_send, reqs[i].lane)) continue;
      struct dccl_conn_entry *e = calloc(1, sizeof(*e));
      e->peer = reqs[i].peer;
      e->is_send = reqs[i].is_send;
      e->lane = reqs[i].lane;
      e->conn = (struct dccl_conn){
          .transport = &mem_transport, .ctx = &comms[r].tctx, .peer = e->peer, .is_send = e->is_send, .lane = e->lane};
      if (e->is_send)
        bind_link(&e->conn, r, e->peer, e->lane);
      else
        bind_link(&e->conn, e->peer, r, e->lane);
      e->next = atomic_load(&comms[r].conns);
      atomic_store(&comms[r].conns, e);
    }
    free(reqs);
  }
}

static void make_comms(struct dccl_comm *comms, int n, const uint64_t *hosts) {
  int *order = malloc((size_t)n * sizeof(int));
  dccl_ring_order(hosts, n, order);
  for (int r = 0; r < n; r++) {
    struct dccl_comm *c = &comms[r];
    memset(c, 0, sizeof(*c));
    c->rank = r;
    c->nranks = n;
    c->peers = calloc((size_t)n, sizeof(*c->peers)); /* the hosts, for the two-level trees */
    for (int q = 0; q < n; q++) c->peers[q].host_hash = hosts[q];
    dccl_comm_fill_views(c);
    c->coll.nchannels = 2;
    c->coll.alpha_ns = 1000;
    c->coll.bw_bytes_per_ns = 10;
    pthread_mutex_init(&c->conn_lock, NULL);
    pthread_mutex_init(&c->error_lock, NULL);
    atomic_store(&c->dead_rank, -1);
    for (int ch = 0; ch < c->coll.nchannels; ch++) {
      c->coll.rings[ch].order = malloc((size_t)n * sizeof(int));
      memcpy(c->coll.rings[ch].order, order, (size_t)n * sizeof(int));
      for (int i = 0; i < n; i++)
        if (order[i] == r) c->coll.rings[ch].pos = i;
      c->coll.rings[ch].next = order[(c->coll.rings[ch].pos + 1) % n];
      c->coll.rings[ch].prev = order[(c->coll.rings[ch].pos + n - 1) % n];
    }
  }
  free(order);
}

static void free_comms(struct dccl_comm *comms, int n) {
  for (int r = 0; r < n; r++) {
    for (struct dccl_conn_entry *e = atomic_load(&comms[r].conns), *next; e; e = next) {
      next = e->next;
      dccl_conn_unbind(&e->conn);
      free(e);
    }
    for (int ch = 0; ch < comms[r].coll.nchannels; ch++) free(comms[r].coll.rings[ch].order);
    free(comms[r].peers);
  }
  for (int i = 0; i < nlinks; i++) free(links[i].fifo);
  nlinks = 0;
}

/* Inputs are small integers stored as int32, so every reduction order gives the same exact answer. */
static int32_t input_value(int rank, uint64_t i) { return (int32_t)((rank * 7 + (int)(i % 13)) % 11) - 5; }

/* algo DCCL_ALGO_ORDERED: deterministic mode's plan (the communicators say deterministic, the op asks for none). */
static void run_case(int kind, int algo, int n, uint64_t count, int root, const uint64_t *hosts) {
  struct dccl_comm *comms = calloc((size_t)n, sizeof(*comms));
  struct dccl_op **ops = calloc((size_t)n, sizeof(*ops));
  int32_t **in = calloc((size_t)n, sizeof(*in)), **out = calloc((size_t)n, sizeof(*out));
  uint64_t in_count = kind == DCCL_OP_REDUCESCATTER ? count * (uint64_t)n : count;
  uint64_t out_count = kind == DCCL_OP_ALLGATHER ? count * (uint64_t)n : count;
  make_comms(comms, n, hosts);
  for (int r = 0; r < n; r++) comms[r].coll.deterministic = algo == DCCL_ALGO_ORDERED;
  for (int r = 0; r < n; r++) {
    in[r] = malloc((in_count + 1) * sizeof(int32_t));
    out[r] = malloc((out_count + 1) * sizeof(int32_t));
    for (uint64_t i = 0; i < in_count; i++) in[r][i] = input_value(r, i);
    for (uint64_t i = 0; i < out_count; i++) out[r][i] = 0x7eadbeef;
    struct dccl_op *op = calloc(1, sizeof(*op));
    op->comm = &comms[r].coll;
    op->kind = kind;
    op->sendbuff = in[r];
    op->recvbuff = out[r];
    op->count = count;
    op->type = ncclInt32;
    op->esize = 4;
    op->root = root;
    op->algo = algo == DCCL_ALGO_ORDERED ? DCCL_ALGO_AUTO : algo;
    dccl_redop_builtin(&op->redop, ncclSum, ncclInt32, n);
    dccl_op_plan(op);
    ops[r] = op;
  }
  connect_all(comms, ops, n);
  for (int r = 0; r < n; r++) {
    dccl_op_bind(ops[r]);
    ops[r]->next = r + 1 < n ? ops[r + 1] : NULL;
    dccl_op_post(ops[r]);
  }
  ncclResult_t res = dccl_ops_wait(ops[0]);
  CHECK(res == ncclSuccess, "%s %s n=%d count=%llu: exec returned %d", dccl_op_name(kind), dccl_algo_name(algo), n,
        (unsigned long long)count, (int)res);
  int wrong = 0;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (kind == DCCL_OP_REDUCE && r != root) continue;
    for (uint64_t i = 0; i < out_count; i++) {
      int32_t expect = 0;
      if (kind == DCCL_OP_ALLREDUCE || kind == DCCL_OP_REDUCE) {
        for (int q = 0; q < n; q++) expect += input_value(q, i);
      } else if (kind == DCCL_OP_REDUCESCATTER) {
        for (int q = 0; q < n; q++) expect += input_value(q, (uint64_t)r * count + i);
      } else if (kind == DCCL_OP_ALLGATHER) {
        expect = input_value((int)(i / count), i % count);
      } else {
        expect = input_value(root, i);
      }
      if (out[r][i] != expect && wrong++ < 3)
        printf("  rank %d element %llu: %d, expected %d\n", r, (unsigned long long)i, out[r][i], expect);
    }
  }
  CHECK(wrong == 0, "%s %s n=%d count=%llu root=%d: %d wrong elements", dccl_op_name(kind), dccl_algo_name(algo), n,
        (unsigned long long)count, root, wrong);
  for (int r = 0; r < n; r++) {
    free(in[r]);
    free(out[r]);
    free(ops[r]);
  }
  free_comms(comms, n);
  free(in);
  free(out);
  free(ops);
  free(comms);
}

static void test_ring_order(void) {
  uint64_t hosts[4] = {1, 2, 1, 2}; /* ranks 0,2 on one host, 1,3 on another */
  int order[4];
  CHECK(dccl_ring_order(hosts, 4, order) == 2, "two hosts expected");
  CHECK(dccl_ring_host_crossings(hosts, order, 4) == 2, "ring crosses hosts %d times, expected 2",
        dccl_ring_host_crossings(hosts, order, 4));
  int identity[4] = {0, 1, 2, 3};
  CHECK(dccl_ring_host_crossings(hosts, identity, 4) == 4, "the naive order crosses 4 times");
  uint64_t one[3] = {5, 5, 5};
  CHECK(dccl_ring_order(one, 3, order) == 1 && dccl_ring_host_crossings(one, order, 3) == 0, "one host");
  CHECK(dccl_ring_busiest_host(one, order, 3) == 3, "one host of 3: the busiest has 3");
  uint64_t uneven[6] = {7, 8, 7, 9, 7, 8}; /* three ranks on host 7, two on 8, one on 9 */
  int order6[6];
  CHECK(dccl_ring_order(uneven, 6, order6) == 3 && dccl_ring_busiest_host(uneven, order6, 6) == 3,
        "uneven hosts: the busiest has 3, got %d", dccl_ring_busiest_host(uneven, order6, 6));
}

/* Device rings take one channel per 128 KiB, at most 32 below 256 MiB and every device channel from there. */
static void test_device_ring_channels(void) {
  struct dccl_comm comm;
  uint64_t hosts[2] = {0, 0};
  make_comms(&comm, 1, hosts);
  comm.nranks = comm.coll.nranks = 2;
  comm.coll.dev_nchannels = 64;
  struct { uint64_t bytes; int want; } cases[] = {{4096, 1},       {128 << 10, 1},   {512 << 10, 4},
                                                   {2 << 20, 16},    {8 << 20, 32},    {255ull << 20, 32},
                                                   {256ull << 20, 64}, {1ull << 30, 64}};
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dccl_op op = {.comm = &comm.coll, .kind = DCCL_OP_ALLREDUCE, .count = cases[i].bytes / 4,
                         .type = ncclFloat32, .esize = 4, .algo = DCCL_ALGO_RING, .root = -1, .peer = -1,
                         .on_device = 1};
    dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 2);
    dccl_op_plan(&op);
    CHECK(op.nchannels == cases[i].want, "device ring of %llu bytes: %d channels, expected %d",
          (unsigned long long)cases[i].bytes, op.nchannels, cases[i].want);
  }
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* The direct collectives take a CTA per 64 KiB of what the rank reads and writes, at most 32 below 256 MiB: at 4
 * ranks, the all-reduce's 2 S, the all-gather's and reduce-scatter's 5 S (S: each rank's block), the broadcast's and
 * reduce's 5 S / 4. */
static void test_direct_channels(void) {
  struct dccl_comm comm;
  uint64_t hosts[1] = {0};
  make_comms(&comm, 1, hosts);
  comm.nranks = comm.coll.nranks = 4;
  comm.coll.dev_nchannels = 64;
  comm.coll.direct_ok = DCCL_DIRECT_ONE_PROCESS;
  struct { int kind; uint64_t bytes; int want; } cases[] = {
      {DCCL_OP_ALLREDUCE, 64 << 10, 2},      {DCCL_OP_ALLREDUCE, 256 << 10, 8},   {DCCL_OP_ALLREDUCE, 1 << 20, 32},
      {DCCL_OP_ALLREDUCE, 256ull << 20, 64}, {DCCL_OP_ALLGATHER, 64 << 10, 5},    {DCCL_OP_ALLGATHER, 256 << 10, 20},
      {DCCL_OP_REDUCESCATTER, 1 << 20, 32},  {DCCL_OP_BROADCAST, 64 << 10, 1},    {DCCL_OP_BROADCAST, 1 << 20, 20},
      {DCCL_OP_REDUCE, 512 << 10, 10},       {DCCL_OP_REDUCE, 4 << 20, 32}};
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dccl_op op = {.comm = &comm.coll, .kind = cases[i].kind, .count = cases[i].bytes / 4, .type = ncclFloat32,
                         .esize = 4, .algo = DCCL_ALGO_DIRECT, .root = 0, .peer = -1, .on_device = 1};
    dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 4);
    dccl_op_plan(&op);
    CHECK(op.algo == DCCL_ALGO_DIRECT && op.nchannels == cases[i].want, "direct %s of %llu bytes at 4 ranks: %s on %d "
          "channels, expected direct on %d", dccl_op_name(cases[i].kind), (unsigned long long)cases[i].bytes,
          dccl_algo_name(op.algo), op.nchannels, cases[i].want);
  }
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* Rank 0's view of 4 ranks on one host with 8 device channels (planning only: no links). */
static void four_rank_device_comm(struct dccl_comm *comm) {
  uint64_t hosts[4] = {0, 0, 0, 0};
  make_comms(comm, 1, hosts);
  comm->nranks = comm->coll.nranks = 4;
  comm->coll.dev_nchannels = 8;
}

/* Which device collectives run directly: across processes (DCCL_DIRECT_WINDOWS) only calls whose buffers lie in
 * windows (a buffer the call does not use on this rank counts as in one), every collective but send/recv, never a
 * per-rank premultiply; in one process any buffer. */
static void test_direct_choice(void) {
  struct dccl_comm comm;
  four_rank_device_comm(&comm);
  struct {
    int reach, kind, algo, send_win, recv_win, premulsum, direct;
    const char *what;
  } cases[] = {
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, 0, 1, 0, 1, "an all-reduce in windows"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, -1, 1, 0, 0, "an all-reduce from outside a window"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLREDUCE, DCCL_ALGO_DIRECT, 0, -1, 0, 0, "a forced direct into no window"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, 0, 1, 1, 0, "a per-rank premultiply"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLGATHER, DCCL_ALGO_AUTO, 0, 1, 0, 1, "an all-gather in windows"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLGATHER, DCCL_ALGO_AUTO, 0, -1, 0, 0, "an all-gather into no window"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_REDUCE, DCCL_ALGO_AUTO, 0, DCCL_WINDOW_UNUSED, 0, 1,
       "a reduce off the root (its output unused)"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_ALLGATHER, DCCL_ALGO_DIRECT, 0, 1, 0, 1, "an all-gather asked for"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_BROADCAST, DCCL_ALGO_DIRECT, DCCL_WINDOW_UNUSED, 1, 0, 1,
       "a broadcast off the root (its input unused)"},
      {DCCL_DIRECT_WINDOWS, DCCL_OP_REDUCESCATTER, DCCL_ALGO_DIRECT, 0, -1, 0, 0, "a reduce-scatter into no window"},
      {DCCL_DIRECT_ONE_PROCESS, DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, -1, -1, 0, 1, "one process, any buffer"},
      {DCCL_DIRECT_NONE, DCCL_OP_ALLREDUCE, DCCL_ALGO_DIRECT, 0, 1, 0, 0, "no boards"},
  };
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    comm.coll.direct_ok = cases[i].reach;
    struct dccl_op op = {.comm = &comm.coll, .kind = cases[i].kind, .count = 100000, .type = ncclFloat32,
                         .esize = 4, .algo = cases[i].algo, .root = 1, .peer = -1, .on_device = 1,
                         .send_win = cases[i].send_win, .recv_win = cases[i].recv_win};
    dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 4);
    if (cases[i].premulsum) op.redop.has_pre = 1, op.redop.called = DCCL_CALLED_PREMULSUM;
    dccl_op_plan(&op);
    int direct = op.algo == DCCL_ALGO_DIRECT && op.nchannels > 0 && op.ch[0].sched.algo == DCCL_SCHED_DIRECT;
    CHECK(direct == cases[i].direct, "%s: %s", cases[i].what, direct ? "direct" : "not direct");
    if (direct)
      CHECK(op.ch[0].sched.root == 1 && op.ch[0].sched.block == 100000 && op.ch[0].sched.rank == 0,
            "%s: the channel's root, block and rank", cases[i].what);
  }
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* Device all-reduces of at most 2 KiB (half an LL step) take the one-shot through the FIFOs even in one process, where
 * the direct path could run (it meets every rank before and after: slower there); larger ones and the other
 * collectives take direct; DCCL_ALGO=direct (the op's algo) still gets direct at any size. */
static void test_small_allreduce_choice(void) {
  struct dccl_comm comm;
  four_rank_device_comm(&comm);
  comm.coll.direct_ok = DCCL_DIRECT_ONE_PROCESS;
  struct {
    int kind, algo;
    uint64_t count;
    int want;
    const char *what;
  } cases[] = {
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, 2, DCCL_ALGO_ONESHOT, "an 8-byte all-reduce"},
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, DCCL_DEV_LL_BYTES / 8, DCCL_ALGO_ONESHOT, "a 2 KiB all-reduce"},
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_AUTO, DCCL_DEV_LL_BYTES / 8 + 1, DCCL_ALGO_DIRECT, "2 KiB and 4 bytes"},
      {DCCL_OP_ALLREDUCE, DCCL_ALGO_DIRECT, 2, DCCL_ALGO_DIRECT, "an 8-byte all-reduce asked to go direct"},
      {DCCL_OP_ALLGATHER, DCCL_ALGO_AUTO, 2, DCCL_ALGO_DIRECT, "an 8-byte all-gather"},
  };
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dccl_op op = {.comm = &comm.coll, .kind = cases[i].kind, .count = cases[i].count, .type = ncclFloat32,
                         .esize = 4, .algo = cases[i].algo, .root = -1, .peer = -1, .on_device = 1, .send_win = -1,
                         .recv_win = -1};
    dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 4);
    ncclResult_t res = dccl_op_plan(&op);
    CHECK(res == ncclSuccess && op.algo == cases[i].want, "one process, %s: %s (want %s)", cases[i].what,
          dccl_algo_name(op.algo), dccl_algo_name(cases[i].want));
  }
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* Deterministic mode with device buffers: the direct collectives where every buffer is in reach, else the one-shot
 * (up to 64 KiB) and the ordered schedules in kernels, whatever DCCL_ALGO asked, for all-reduce, reduce and
 * reduce-scatter; more than 9 ranks are refused (a link to every other rank). */
static void test_deterministic_device(void) {
  struct dccl_comm comm;
  four_rank_device_comm(&comm);
  comm.coll.deterministic = 1;
  struct {
    int reach, kind;
    uint64_t count;
    int algo, sched;
    const char *what;
  } cases[] = {
      {DCCL_DIRECT_NONE, DCCL_OP_ALLREDUCE, 100000, DCCL_ALGO_ORDERED, DCCL_SCHED_ORDERED_ALLREDUCE, "a large all-reduce"},
      {DCCL_DIRECT_NONE, DCCL_OP_ALLREDUCE, 8, DCCL_ALGO_ONESHOT, DCCL_SCHED_ONESHOT_ALLREDUCE, "a small all-reduce"},
      {DCCL_DIRECT_NONE, DCCL_OP_REDUCE, 100000, DCCL_ALGO_ORDERED, DCCL_SCHED_ORDERED_REDUCE, "a reduce"},
      {DCCL_DIRECT_NONE, DCCL_OP_REDUCESCATTER, 8, DCCL_ALGO_ORDERED, DCCL_SCHED_ORDERED_REDUCESCATTER,
       "a reduce-scatter"},
      {DCCL_DIRECT_ONE_PROCESS, DCCL_OP_ALLREDUCE, 100000, DCCL_ALGO_DIRECT, DCCL_SCHED_DIRECT,
       "an all-reduce of one process"},
      {DCCL_DIRECT_ONE_PROCESS, DCCL_OP_REDUCE, 100000, DCCL_ALGO_DIRECT, DCCL_SCHED_DIRECT, "a reduce of one process"},
      {DCCL_DIRECT_ONE_PROCESS, DCCL_OP_REDUCESCATTER, 8, DCCL_ALGO_DIRECT, DCCL_SCHED_DIRECT,
       "a reduce-scatter of one process"},
  };
  for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    comm.coll.direct_ok = cases[i].reach;
    struct dccl_op op = {.comm = &comm.coll, .kind = cases[i].kind, .count = cases[i].count, .type = ncclFloat32,
                         .esize = 4, .algo = DCCL_ALGO_AUTO, .root = 1, .peer = -1, .on_device = 1, .send_win = -1,
                         .recv_win = -1};
    dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 4);
    ncclResult_t res = dccl_op_plan(&op);
    CHECK(res == ncclSuccess && op.algo == cases[i].algo && op.nchannels >= 1 &&
              op.ch[0].sched.algo == cases[i].sched,
          "deterministic device %s: result %d, algo %s, schedule %d (want %s, %d)", cases[i].what, res,
          dccl_algo_name(op.algo), op.ch[0].sched.algo, dccl_algo_name(cases[i].algo), cases[i].sched);
  }
  comm.nranks = comm.coll.nranks = 10;
  comm.coll.direct_ok = DCCL_DIRECT_NONE;
  struct dccl_op op = {.comm = &comm.coll, .kind = DCCL_OP_ALLREDUCE, .count = 100, .type = ncclFloat32, .esize = 4,
                       .algo = DCCL_ALGO_AUTO, .root = -1, .peer = -1, .on_device = 1, .send_win = -1, .recv_win = -1};
  dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 10);
  CHECK(dccl_op_plan(&op) == ncclInvalidUsage && strstr(ncclGetLastError(NULL), "at most 9 ranks"),
        "deterministic device all-reduce of 10 ranks: refused, naming the limit (%s)", ncclGetLastError(NULL));
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* Deterministic mode over device links across processes: the ordered schedules split their range over up to 8
 * channels (every channel at 2 ranks), each on its own lane with links to every peer, together covering every
 * element once, and every link they use is one that creation makes. Ranks of one process keep what the direct
 * collectives cannot take (a per-rank premultiply) on channel 0, whose links creation makes for the one-shot. */
static void test_deterministic_channels(void) {
  struct dccl_comm comm;
  four_rank_device_comm(&comm);
  comm.coll.deterministic = 1;
  comm.coll.dev_nchannels = 16;
  comm.coll.direct_ok = DCCL_DIRECT_NONE;
  struct dccl_conn_req *made = NULL, *used = NULL;
  int nmade = 0, madecap = 0, usedcap = 0;
  CHECK(dccl_coll_creation_links(&comm.coll, 1, DCCL_ALGO_AUTO, &made, &nmade, &madecap) == ncclSuccess,
        "deterministic: the links made at creation");
  const int kinds[] = {DCCL_OP_ALLREDUCE, DCCL_OP_REDUCE, DCCL_OP_REDUCESCATTER};
  const int scheds[] = {DCCL_SCHED_ORDERED_ALLREDUCE, DCCL_SCHED_ORDERED_REDUCE, DCCL_SCHED_ORDERED_REDUCESCATTER};
  const uint64_t counts[] = {100000, 2 << 20, 12345677};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 3; i++) {
      struct dccl_op op = {.comm = &comm.coll, .kind = kinds[k], .count = counts[i], .type = ncclFloat32, .esize = 4,
                           .algo = DCCL_ALGO_AUTO, .root = 1, .peer = -1, .on_device = 1, .send_win = -1,
                           .recv_win = -1};
      dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 4);
      CHECK(dccl_op_plan(&op) == ncclSuccess && op.algo == DCCL_ALGO_ORDERED, "deterministic %s of %llu: ordered",
            dccl_op_name(kinds[k]), (unsigned long long)counts[i]);
      CHECK(op.nchannels >= 2 && op.nchannels <= 8 && (counts[i] < (2 << 20) || op.nchannels == 8),
            "deterministic %s of %llu: %d channels (2-8; 8 from 8 MiB)", dccl_op_name(kinds[k]),
            (unsigned long long)counts[i], op.nchannels);
      uint64_t next = 0;
      for (int c = 0; c < op.nchannels; c++) {
        const struct dccl_op_channel *ch = &op.ch[c];
        CHECK(ch->sched.begin == next && ch->sched.count > 0 && ch->sched.algo == scheds[k] &&
                  ch->lane == DCCL_LANE_DEVICE + c && ch->sched.npeers == 3,
              "deterministic %s of %llu, channel %d: begins %llu (want %llu), %llu elements, lane %d",
              dccl_op_name(kinds[k]), (unsigned long long)counts[i], c, (unsigned long long)ch->sched.begin,
              (unsigned long long)next, (unsigned long long)ch->sched.count, ch->lane);
        next = ch->sched.begin + ch->sched.count;
      }
      CHECK(next == counts[i], "deterministic %s of %llu: the channels cover %llu elements",
            dccl_op_name(kinds[k]), (unsigned long long)counts[i], (unsigned long long)next);
      int nused = 0;
      CHECK(dccl_op_conn_reqs(&op, &used, &nused, &usedcap) == ncclSuccess && nused > 0, "its links");
      for (int u = 0; u < nused; u++) {
        int found = 0;
        for (int m = 0; m < nmade && !found; m++)
          found = made[m].peer == used[u].peer && made[m].is_send == used[u].is_send && made[m].lane == used[u].lane;
        CHECK(found, "deterministic %s of %llu: the link to %d (%s, lane %d) is made at creation",
              dccl_op_name(kinds[k]), (unsigned long long)counts[i], used[u].peer, used[u].is_send ? "send" : "recv",
              used[u].lane);
      }
    }
  /* At 2 ranks the ordered links are the rings': every device channel. */
  comm.nranks = comm.coll.nranks = 2;
  struct dccl_op two = {.comm = &comm.coll, .kind = DCCL_OP_ALLREDUCE, .count = 2 << 20, .type = ncclFloat32,
                        .esize = 4, .algo = DCCL_ALGO_AUTO, .root = -1, .peer = -1, .on_device = 1, .send_win = -1,
                        .recv_win = -1};
  dccl_redop_builtin(&two.redop, ncclSum, ncclFloat32, 2);
  CHECK(dccl_op_plan(&two) == ncclSuccess && two.algo == DCCL_ALGO_ORDERED && two.nchannels == 16,
        "deterministic all-reduce of 8 MiB at 2 ranks: ordered on all 16 channels (%s, %d)", dccl_algo_name(two.algo),
        two.nchannels);
  comm.nranks = comm.coll.nranks = 4;
  comm.coll.direct_ok = DCCL_DIRECT_ONE_PROCESS;
  struct dccl_op op = {.comm = &comm.coll, .kind = DCCL_OP_ALLREDUCE, .count = 2 << 20, .type = ncclFloat32,
                       .esize = 4, .algo = DCCL_ALGO_AUTO, .root = -1, .peer = -1, .on_device = 1, .send_win = -1,
                       .recv_win = -1};
  dccl_redop_builtin(&op.redop, ncclSum, ncclFloat32, 4);
  op.redop.has_pre = 1, op.redop.called = DCCL_CALLED_PREMULSUM;
  CHECK(dccl_op_plan(&op) == ncclSuccess && op.algo == DCCL_ALGO_ORDERED && op.nchannels == 1,
        "deterministic per-rank premultiply in one process: ordered on one channel (%s, %d)", dccl_algo_name(op.algo),
        op.nchannels);
  free(made);
  free(used);
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* The direct collectives: every channel holds the whole operation (begin 0, its count, the channel count), and the
 * kernel's walk (thread t of channel c of C, T threads a CTA: 16-byte packs c T + t, (C + c) T + t, ..., then the
 * elements past the last whole pack, as dev_reduce_copy spreads them) of every rank's part covers each element
 * exactly once: a slice for the all-reduce, broadcast and reduce, its own block for all-gather (counted here for
 * rank 0 only: every rank walks a block of the same size). */
static void test_direct_parts(void) {
  struct dccl_comm comm;
  uint64_t hosts[8] = {0};
  make_comms(&comm, 1, hosts);
  comm.coll.dev_nchannels = 8;
  comm.coll.direct_ok = DCCL_DIRECT_ONE_PROCESS;
  uint64_t counts[] = {4099, 65536, (1 << 20) + 17, 3000001};
  int kinds[] = {DCCL_OP_ALLREDUCE, DCCL_OP_BROADCAST, DCCL_OP_REDUCE, DCCL_OP_ALLGATHER};
  uint32_t esizes[] = {1, 2, 4, 8};
  ncclDataType_t types[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64};
  const uint64_t threads = 64; /* T: any count the walk is written for */
  for (int n = 2; n <= 8; n += 3)
    for (unsigned k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
      for (unsigned e = 0; e < 4; e++)
        for (unsigned i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
          comm.nranks = comm.coll.nranks = n;
          uint64_t count = counts[i];
          struct dccl_op op = {.comm = &comm.coll, .kind = kinds[k], .count = count, .type = types[e],
                               .esize = esizes[e], .algo = DCCL_ALGO_DIRECT, .root = 0, .peer = -1, .on_device = 1};
          dccl_redop_builtin(&op.redop, ncclSum, types[e], n);
          dccl_op_plan(&op);
          int block_op = kinds[k] == DCCL_OP_ALLGATHER;
          unsigned char *seen = calloc(count, 1);
          int planned = op.algo == DCCL_ALGO_DIRECT && op.nchannels >= 1 && (op.nchannels > 1 || count < 3000001);
          const uint64_t per_pack = 16 / esizes[e];
          for (int c = 0; c < op.nchannels; c++) {
            struct dccl_sched s = op.ch[c].sched;
            planned &= s.algo == DCCL_SCHED_DIRECT && s.begin == 0 && s.count == count &&
                       s.direct_channels == op.nchannels;
            for (int me = 0; me < (block_op ? 1 : n); me++) {
              uint64_t lo, hi;
              dccl_direct_part(&s, me, esizes[e], block_op, &lo, &hi);
              uint64_t len = hi - lo, packs = len / per_pack, all = threads * (uint64_t)s.direct_channels;
              for (uint64_t t = (uint64_t)c * threads; t < (uint64_t)(c + 1) * threads; t++) {
                for (uint64_t p = t; p < packs; p += all)
                  for (uint64_t x = 0; x < per_pack; x++) seen[lo + p * per_pack + x]++;
                for (uint64_t x = packs * per_pack + t; x < len; x += all) seen[lo + x]++;
              }
            }
          }
          uint64_t wrong = 0;
          for (uint64_t x = 0; x < count; x++) wrong += seen[x] != 1;
          CHECK(planned && wrong == 0, "direct %s of %llu x %u bytes, %d ranks: %d channels, %s, %llu elements not "
                "covered once", dccl_op_name(kinds[k]), (unsigned long long)count, esizes[e], n, op.nchannels,
                planned ? "as planned" : "NOT as planned", (unsigned long long)wrong);
          free(seen);
        }
  comm.nranks = comm.coll.nranks = 1;
  free_comms(&comm, 1);
}

/* The trees' shape across hosts: for each tree of an all-reduce and each rooted tree, every rank but the root has a
 * parent that lists it as a child, at most two children each, every rank reaches the root, and exactly H - 1 edges
 * join ranks of different hosts (H hosts; the ring keeps each host's ranks together). */
static void test_tree_shape(int n, const uint64_t *hosts, int nhosts) {
  struct dccl_comm *comms = calloc((size_t)n, sizeof(*comms));
  make_comms(comms, n, hosts);
  for (int root = -1; root < n; root++) {
    int ntrees = root < 0 ? 2 : 1;
    for (int t = 0; t < ntrees; t++) {
      int parent[16], crossing = 0, bad = 0;
      for (int r = 0; r < n; r++) {
        struct dccl_op op = {.comm = &comms[r].coll, .kind = root < 0 ? DCCL_OP_ALLREDUCE : DCCL_OP_BROADCAST,
                             .count = 1 << 20, .type = ncclFloat32, .esize = 4, .algo = DCCL_ALGO_TREE,
                             .root = root < 0 ? -1 : root, .peer = -1};
        dccl_op_plan(&op);
        const struct dccl_op_channel *ch = &op.ch[t];
        int p = ch->recv_peer[DCCL_TREE_PARENT]; /* both kinds receive from the parent */
        parent[r] = p;
        crossing += p >= 0 && hosts[p] != hosts[r];
        bad += ch->sched.nchildren > 2 || (p < 0) != ch->sched.is_root;
      }
      int roots = 0, unreachable = 0;
      for (int r = 0; r < n; r++) {
        roots += parent[r] < 0;
        int x = r, hops = 0;
        while (x >= 0 && parent[x] >= 0 && hops++ < n) x = parent[x];
        unreachable += hops >= n;
      }
      CHECK(roots == 1 && unreachable == 0 && crossing == nhosts - 1 && bad == 0 &&
                (root < 0 || parent[root] < 0),
            "tree %d (root %d) over %d ranks on %d hosts: %d roots, %d ranks without a way up, %d edges between "
            "hosts (want %d), %d bad nodes", t, root, n, nhosts, roots, unreachable, crossing, nhosts - 1, bad);
    }
  }
  free_comms(comms, n);
  free(comms);
}

static void test_tree_shapes(void) {
  uint64_t hosts[16];
  for (int n = 2; n <= 16; n++)
    for (int per = 1; per <= n; per++) { /* hosts of `per` ranks (the last may hold fewer) */
      for (int r = 0; r < n; r++) hosts[r] = (uint64_t)(r / per);
      test_tree_shape(n, hosts, (n + per - 1) / per);
    }
  uint64_t uneven[9] = {7, 7, 7, 3, 3, 9, 9, 9, 9}; /* hosts of 3, 2 and 4 ranks */
  test_tree_shape(9, uneven, 3);
}

int main(void) {
  char why[128];
  if (dccl_transport_complete(&mem_transport, &mem_provider, 0, why, sizeof why) != 0) {
    printf("FAIL: the in-memory transport's table: %s\n", why);
    return 1;
  }
  /* Small slots and a short FIFO, so even these sizes pipeline over many steps and fill the FIFOs. */
  setenv("DCCL_CHUNK_SIZE", "4096", 1);
  setenv("DCCL_NSLOTS", "2", 1);
  uint64_t hosts[9] = {0};
  uint64_t counts[] = {0, 1, 7, 64, 1000, 5000, 12345};
  int kinds[] = {DCCL_OP_ALLREDUCE, DCCL_OP_BROADCAST, DCCL_OP_REDUCE, DCCL_OP_ALLGATHER, DCCL_OP_REDUCESCATTER};
  test_ring_order();
  test_device_ring_channels();
  test_direct_channels();
  test_direct_choice();
  test_small_allreduce_choice();
  test_direct_parts();
  test_deterministic_device();
  test_deterministic_channels();
  test_tree_shapes();
  for (int n = 1; n <= 9; n++)
    for (unsigned k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
      for (int algo = DCCL_ALGO_RING; algo <= DCCL_ALGO_ONESHOT; algo++)
        for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
          int rooted = kinds[k] == DCCL_OP_BROADCAST || kinds[k] == DCCL_OP_REDUCE;
          for (int root = 0; root < (rooted ? n : 1); root++) {
            for (int h = 0; h < n; h++) hosts[h] = (uint64_t)(h % 2); /* two interleaved hosts */
            run_case(kinds[k], algo, n, counts[c], root, hosts);
          }
        }
  /* Deterministic mode's ordered schedules, over and under the one-shot's 64 KiB, with 2-slot FIFOs. */
  uint64_t ordered_counts[] = {0, 1, 7, 1000, 12345, 40000};
  int reductions[] = {DCCL_OP_ALLREDUCE, DCCL_OP_REDUCE, DCCL_OP_REDUCESCATTER};
  for (int n = 2; n <= 9; n++)
    for (unsigned k = 0; k < 3; k++)
      for (unsigned c = 0; c < sizeof(ordered_counts) / sizeof(ordered_counts[0]); c++)
        for (int root = 0; root < (reductions[k] == DCCL_OP_REDUCE ? n : 1); root++)
          run_case(reductions[k], DCCL_ALGO_ORDERED, n, ordered_counts[c], root, hosts);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
