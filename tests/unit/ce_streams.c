/* The copy-engine collectives and send/recv (collectives/device/ce_collectives.c) without a GPU: the module is
 * built with a fake driver whose streams are queues in host memory (copies, flag writes, flag waits, kernels), the
 * ranks' regions are host buffers, and a scheduler runs every rank's queue as far as its waits allow, in an order
 * that varies with a seed. Checked: send/recv of 2 and 4 ranks in one group (pairs, a ring shift, an all-to-all of
 * uneven sizes with two sends to one peer, three operations each way between two ranks, the receives of a rank
 * issued before its sends), chunks from one byte
 * to several, groups after groups, every byte compared; no group deadlocks; a receive whose sender sends another
 * size is reported by the first chunk's kernel naming the sender, and the release of abort ends the waits left;
 * every collective of 3 ranks over several rounds gives its result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/device/ce_collectives.h"
#include "collectives/device/dev_exec.h"
#include "unit_check.h"

#define MAX_OPS 4096
#define CHUNK 4096

struct entry {
  enum { COPY, WRITE, WAIT, KERNEL } kind;
  uint64_t dst, src, bytes; /* COPY; WRITE and WAIT: dst, bytes = the value */
  struct dccl_ce_work work;
};
struct stream {
  struct entry *q;
  int head, tail;
  int mismatched_peer; /* the first peer a kernel found mismatched, or -1 */
};

static struct stream release_streams[256]; /* each rank's abort stream, every world's */
static int nrelease;

static struct entry *push(CUstream s) {
  struct stream *st = (struct stream *)s;
  if (st->tail == MAX_OPS) {
    printf("FAIL: a stream's queue is full\n");
    exit(1);
  }
  return &st->q[st->tail++];
}
static CUresult fake_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  *push(s) = (struct entry){.kind = COPY, .dst = dst, .src = src, .bytes = bytes};
  return CUDA_SUCCESS;
}
static CUresult fake_write(CUstream s, CUdeviceptr at, cuuint32_t value, unsigned flags) {
  (void)flags;
  *push(s) = (struct entry){.kind = WRITE, .dst = at, .bytes = value};
  return CUDA_SUCCESS;
}
static CUresult fake_wait(CUstream s, CUdeviceptr at, cuuint32_t value, unsigned flags) {
  (void)flags;
  *push(s) = (struct entry){.kind = WAIT, .dst = at, .bytes = value};
  return CUDA_SUCCESS;
}
static CUresult fake_stream_create(CUstream *s, unsigned flags) {
  (void)flags;
  if (nrelease == 256) return CUDA_ERROR_OUT_OF_MEMORY;
  release_streams[nrelease].q = calloc(MAX_OPS, sizeof(struct entry));
  *s = (CUstream)&release_streams[nrelease++];
  return CUDA_SUCCESS;
}
static CUresult fake_stream_destroy(CUstream s) {
  struct stream *st = (struct stream *)s;
  free(st->q);
  *st = (struct stream){0};
  return CUDA_SUCCESS;
}
struct dccl_cuda_api dccl_cu = {.memcpy_async = fake_copy, .stream_write_value32 = fake_write,
                                .stream_wait_value32 = fake_wait, .stream_create = fake_stream_create,
                                .stream_destroy = fake_stream_destroy};

static ncclResult_t fake_launch(void *arg, const struct dccl_ce_work *w, CUstream s) {
  (void)arg;
  *push(s) = (struct entry){.kind = KERNEL, .work = *w};
  return ncclSuccess;
}

const char *dccl_cuda_error_text(CUresult r) {
  (void)r;
  return "fake driver error";
}

/* The device's reduction: only float sums are run here. */
struct dccl_dev_redop dccl_dev_redop_of(const struct dccl_redop *r) {
  (void)r;
  struct dccl_dev_redop d;
  memset(&d, 0, sizeof(d));
  return d;
}

/* As the executor's: send and receive agree on bytes; collectives on count and type. */
struct dccl_slot_header dccl_op_call_header(const struct dccl_op *op) {
  struct dccl_slot_header h;
  memset(&h, 0, sizeof(h));
  int p2p = op->kind == DCCL_OP_SEND || op->kind == DCCL_OP_RECV;
  h.kind = (uint32_t)(p2p ? DCCL_OP_SEND : op->kind);
  h.count = p2p ? op->count * op->esize : op->count;
  h.what = p2p ? 0 : (uint32_t)op->type + 1;
  h.root = p2p ? -1 : op->root;
  return h;
}

/* The kernel: the calls compared as dev_ce_calls_match does, then the copies or the rank-order float sum. */
static void run_kernel(struct stream *st, const struct dccl_ce_work *c) {
  for (uint32_t q = 0; c->theirs && q < c->nranks; q++) {
    const uint32_t *t = c->theirs + 4 * q;
    uint64_t count = (uint64_t)t[0] | (uint64_t)t[1] << 32;
    int32_t root = (int32_t)(t[3] >> 8) - 1;
    if ((int32_t)q == c->own || (c->peer_only && (int32_t)q != c->peer_only - 1) ||
        (count == c->call.count && t[2] == c->call.what && (t[3] & 0xffu) == c->call.kind && root == c->call.root))
      continue;
    if (st->mismatched_peer < 0) st->mismatched_peer = (int)q;
    return;
  }
  if (c->mode == DCCL_CE_REDUCE) {
    for (uint64_t i = 0; i < c->count[0]; i++) {
      float acc = 0;
      for (uint32_t s = 0; s < c->n; s++) acc += ((const float *)c->srcs[s])[i];
      ((float *)c->dsts[0])[i] = acc;
    }
    return;
  }
  for (uint32_t i = 0; i < c->n; i++) memcpy(c->dsts[i], c->srcs[i], c->count[i]);
}

/* Runs entry `st->head` if its wait is met; 1 if it ran. */
static int step(struct stream *st) {
  if (st->head == st->tail) return 0;
  struct entry *e = &st->q[st->head];
  switch (e->kind) {
    case COPY: memcpy((void *)(uintptr_t)e->dst, (const void *)(uintptr_t)e->src, e->bytes); break;
    case WRITE: *(volatile uint32_t *)(uintptr_t)e->dst = (uint32_t)e->bytes; break;
    case WAIT:
      if ((int32_t)(*(volatile uint32_t *)(uintptr_t)e->dst - (uint32_t)e->bytes) < 0) return 0;
      break;
    case KERNEL: run_kernel(st, &e->work); break;
  }
  st->head++;
  return 1;
}

/* Every stream as far as it goes, each turn a seeded random number of entries per stream: 1 once all are empty,
 * 0 on a deadlock (some wait that nothing left can satisfy). */
static int run_all(struct stream *streams, int n, unsigned *seed) {
  for (;;) {
    int progress = 0, left = 0;
    for (int r = 0; r < n; r++) {
      for (int k = (int)(rand_r(seed) % 4) + 1; k > 0 && step(&streams[r]); k--) progress = 1;
      left += streams[r].head != streams[r].tail;
    }
    for (int r = 0; r < nrelease; r++) progress |= step(&release_streams[r]);
    if (!left) return 1;
    if (!progress) return 0;
  }
}

static int nranks;
static struct dccl_ce *ces[8];
static unsigned char *regions[8];
static struct stream streams[8];

static void world(int n) {
  nranks = n;
  uint64_t addrs[8];
  size_t bytes = dccl_ce_region_bytes(n, CHUNK, 1);
  for (int r = 0; r < n; r++) {
    regions[r] = calloc(1, bytes);
    addrs[r] = (uint64_t)(uintptr_t)regions[r];
  }
  for (int r = 0; r < n; r++) {
    check(dccl_ce_create(r, n, CHUNK, 1, addrs[r], addrs, &ces[r]) == ncclSuccess, "create rank %d", r);
    streams[r] = (struct stream){.q = calloc(MAX_OPS, sizeof(struct entry)), .mismatched_peer = -1};
  }
}

static void world_end(void) {
  for (int r = 0; r < nranks; r++) {
    dccl_ce_free(ces[r]);
    free(regions[r]);
    free(streams[r].q);
  }
}

/* One group: rank r's operations ops[r][0..nops[r]) issued (host side), then every stream run. */
static int group(struct dccl_op ops[8][16], const int *nops, unsigned seed) {
  for (int r = 0; r < nranks; r++) {
    struct dccl_op *list[16];
    for (int i = 0; i < nops[r]; i++) list[i] = &ops[r][i];
    if (nops[r] && dccl_ce_p2p(ces[r], list, nops[r], (CUstream)&streams[r], fake_launch, NULL) != ncclSuccess)
      return 0;
  }
  return run_all(streams, nranks, &seed);
}

static unsigned char pattern(int from, int to, int op, uint64_t i) {
  return (unsigned char)(from * 31 + to * 7 + op * 13 + i * 5 + (i >> 12));
}

/* Rank r sends bytes[r][p][k] to each p (k-th operation to p), receives the same from every p; `recv_first`: rank 1
 * issues its receives before its sends. Every received byte is checked. */
static void exchange(int n, uint64_t bytes[8][8][3], int recv_first, unsigned seed, const char *what) {
  static struct dccl_op ops[8][16];
  int nops[8] = {0};
  unsigned char *bufs[8][8][3][2] = {{{{0}}}}; /* [r][p][k][send, recv] */
  for (int r = 0; r < n; r++)
    for (int pass = 0; pass < 2; pass++) {
      int sends = (pass == 0) != (recv_first && r == 1);
      for (int p = 0; p < n; p++)
        for (int k = 0; k < 3; k++) {
          uint64_t b = sends ? bytes[r][p][k] : bytes[p][r][k];
          if (p == r || b == 0) continue;
          unsigned char *buf = malloc(b);
          if (sends)
            for (uint64_t i = 0; i < b; i++) buf[i] = pattern(r, p, k, i);
          else
            memset(buf, 0xee, b);
          bufs[r][p][k][!sends] = buf;
          ops[r][nops[r]++] = (struct dccl_op){.kind = sends ? DCCL_OP_SEND : DCCL_OP_RECV, .peer = p, .count = b,
                                               .esize = 1, .type = ncclInt8, .on_device = 1,
                                               .sendbuff = sends ? buf : NULL, .recvbuff = sends ? NULL : buf};
        }
    }
  int done = group(ops, nops, seed);
  for (int r = 0; !done && r < n; r++) streams[r].head = streams[r].tail; /* a deadlock: drop what is left */
  uint64_t wrong = 0;
  for (int r = 0; r < n; r++)
    for (int p = 0; p < n; p++)
      for (int k = 0; k < 3; k++) {
        unsigned char *got = bufs[r][p][k][1];
        for (uint64_t i = 0; got && i < bytes[p][r][k]; i++) wrong += got[i] != pattern(p, r, k, i);
        free(bufs[r][p][k][0]);
        free(got);
      }
  int mismatches = 0;
  for (int r = 0; r < n; r++) mismatches += streams[r].mismatched_peer >= 0;
  check(done && wrong == 0 && mismatches == 0, "%s (seed %u): %s, %llu bytes wrong, %d mismatches", what, seed,
        done ? "ran" : "DEADLOCKED", (unsigned long long)wrong, mismatches);
}

static void send_recv_cases(void) {
  static const uint64_t sizes[] = {1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 77};
  for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
    for (int recv_first = 0; recv_first < 2; recv_first++) {
      uint64_t bytes[8][8][3] = {{{0}}};
      bytes[0][1][0] = bytes[1][0][0] = sizes[s];
      world(2);
      char what[96];
      snprintf(what, sizeof(what), "2 ranks swap %llu bytes%s", (unsigned long long)sizes[s],
               recv_first ? ", rank 1 receiving first" : "");
      for (int g = 0; g < 3; g++) exchange(2, bytes, recv_first, 17 * s + g, what); /* groups after groups */
      world_end();
    }
  for (unsigned seed = 1; seed <= 20; seed++) {
    world(4);
    uint64_t ring[8][8][3] = {{{0}}}, all[8][8][3] = {{{0}}};
    for (int r = 0; r < 4; r++) ring[r][(r + 1) % 4][0] = 3 * CHUNK + 5 * seed;
    exchange(4, ring, seed & 1, seed, "4 ranks shift a ring");
    for (int r = 0; r < 4; r++) /* uneven sizes, two operations from rank 0 to rank 1 */
      for (int p = 0; p < 4; p++) all[r][p][0] = (uint64_t)((r * 5 + p * 3 + seed) % 7) * CHUNK + r + p + 1;
    all[0][1][1] = 2 * CHUNK + 3;
    exchange(4, all, seed & 1, seed, "4 ranks all-to-all, uneven");
    exchange(4, all, 0, seed + 100, "4 ranks all-to-all again");
    uint64_t three[8][8][3] = {{{0}}}; /* three operations each way in one group: a round holds one chunk a pair */
    for (int k = 0; k < 3; k++) three[2][3][k] = three[3][2][k] = (uint64_t)(k + 1) * CHUNK + seed;
    exchange(4, three, seed & 1, seed, "3 operations each way between ranks 2 and 3");
    world_end();
  }
}

/* Rank 0 sends `sent` bytes, rank 1 expects `expected`: rank 1's first kernel names rank 0; where rank 1 waits for
 * chunks never sent, the release of abort ends its waits. */
static void mismatch_case(uint64_t sent, uint64_t expected) {
  world(2);
  static struct dccl_op ops[8][16];
  int nops[8] = {1, 1};
  unsigned char *a = calloc(1, sent), *b = calloc(1, expected);
  ops[0][0] = (struct dccl_op){.kind = DCCL_OP_SEND, .peer = 1, .count = sent, .esize = 1, .on_device = 1,
                               .sendbuff = a};
  ops[1][0] = (struct dccl_op){.kind = DCCL_OP_RECV, .peer = 0, .count = expected, .esize = 1, .on_device = 1,
                               .recvbuff = b};
  int done = group(ops, nops, 7);
  int released = 0;
  if (!done) {
    dccl_ce_release(ces[1]);
    dccl_ce_release(ces[0]);
    unsigned seed = 9;
    released = run_all(streams, 2, &seed);
  }
  check(streams[1].mismatched_peer == 0 && streams[0].mismatched_peer < 0 && (done || released),
        "send of %llu bytes against a receive of %llu: rank 1 names rank %d, %s", (unsigned long long)sent,
        (unsigned long long)expected, streams[1].mismatched_peer,
        done ? "all ran" : released ? "the release ended the waits" : "STILL WAITING after the release");
  free(a);
  free(b);
  world_end();
}

/* Rank r's input element i. */
static float input(int r, uint64_t i) { return (float)(r + 1 + i % 5); }

/* What rank r's output element i must be after collective `kind` of `count` (a block's, for the block ones). */
static float expected(int kind, int n, int r, int root, uint64_t count, uint64_t i) {
  float sum = 0;
  switch (kind) {
    case DCCL_OP_REDUCESCATTER:
      for (int q = 0; q < n; q++) sum += input(q, (uint64_t)r * count + i);
      return sum;
    case DCCL_OP_ALLGATHER: return input((int)(i / count), i % count);
    case DCCL_OP_BROADCAST: return input(root, i);
    default:
      for (int q = 0; q < n; q++) sum += input(q, i);
      return sum;
  }
}

/* Every collective of 3 ranks over 2.5 rounds of pieces, float32 sum (reduce to rank 2, broadcast from rank 1),
 * issued on every rank before any stream runs. */
static void collective_cases(void) {
  static const int kinds[] = {DCCL_OP_ALLREDUCE, DCCL_OP_REDUCESCATTER, DCCL_OP_REDUCE, DCCL_OP_ALLGATHER,
                              DCCL_OP_BROADCAST};
  static const char *const names[] = {"all-reduce", "reduce-scatter", "reduce", "all-gather", "broadcast"};
  const int n = 3;
  for (unsigned k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    world(n);
    const int kind = kinds[k], root = kind == DCCL_OP_REDUCE ? 2 : kind == DCCL_OP_BROADCAST ? 1 : -1;
    const uint64_t count = (uint64_t)(2.5 * n * CHUNK / sizeof(float));
    const uint64_t in_n = kind == DCCL_OP_REDUCESCATTER ? n * count : count;
    const uint64_t out_n = kind == DCCL_OP_ALLGATHER ? n * count : count;
    float *in[3], *out[3];
    for (int r = 0; r < n; r++) {
      in[r] = malloc(in_n * sizeof(float));
      out[r] = calloc(out_n, sizeof(float));
      for (uint64_t i = 0; i < in_n; i++) in[r][i] = input(r, i);
      struct dccl_op op = {.kind = kind, .count = count, .esize = 4, .type = ncclFloat32, .root = root,
                           .on_device = 1, .sendbuff = in[r], .recvbuff = out[r]};
      check(dccl_ce_collective(ces[r], &op, (CUstream)&streams[r], fake_launch, NULL) == ncclSuccess, "issue");
    }
    unsigned seed = 3 + k;
    int done = run_all(streams, n, &seed);
    uint64_t wrong = 0;
    for (int r = 0; r < n; r++) {
      for (uint64_t i = 0; i < out_n && (kind != DCCL_OP_REDUCE || r == root); i++)
        wrong += out[r][i] != expected(kind, n, r, root, count, i);
      free(in[r]);
      free(out[r]);
    }
    int mismatches = 0;
    for (int r = 0; r < n; r++) mismatches += streams[r].mismatched_peer >= 0;
    check(done && wrong == 0 && mismatches == 0, "%s of 3 ranks: %s, %llu elements wrong, %d mismatches",
          names[k], done ? "ran" : "DEADLOCKED", (unsigned long long)wrong, mismatches);
    world_end();
  }
}

int main(void) {
  send_recv_cases();
  mismatch_case(3 * CHUNK, 2 * CHUNK);
  mismatch_case(2 * CHUNK, 3 * CHUNK);
  collective_cases();
  printf("ce_streams: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
