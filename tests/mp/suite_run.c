/* Running and checking one case on one rank. Each rank checks its output against the reference (recomputing
 * the other ranks' inputs from the seed): all of it where outputs differ per rank (reduce root, reduce-scatter,
 * send/recv, broadcast), a 1/N share where every rank holds the same output (all-reduce, all-gather), the other
 * shares being covered by the cross-rank bitwise comparison made later on hashes. It also checks the guard zones
 * around every buffer, that the send buffer of an out-of-place call was left alone, and that a reduce left
 * non-root receive buffers alone. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "suite.h"
#include "suite_device.h"
#include "tc_buffer.h"

#define SUITE_LINES_PER_CASE 3
#define SUITE_LINES_PER_RANK 200

static int suite_lines_printed; /* per process: keeps a broken run's log readable */

struct case_ctx {
  const struct suite_rank *me;
  const struct suite_case *c;
  size_t index;
  const struct tc_type_info *ti;
  enum tc_input_class cls;
  struct tc_reduction red;
  struct tc_value *inputs; /* nranks scratch values */
  int bad;
  int lines;
  char name[192];
};

static void case_fail(struct case_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void case_fail(struct case_ctx *x, const char *fmt, ...) {
  x->bad = 1;
  if (x->lines++ >= SUITE_LINES_PER_CASE || suite_lines_printed++ >= SUITE_LINES_PER_RANK) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "rank %d: FAIL case #%zu (%s): %s\n", x->me->rank, x->index, x->name, msg);
}

static int call_failed(struct case_ctx *x, const char *call, ncclResult_t rc) {
  fprintf(stderr, "rank %d: ERROR case #%zu (%s): %s returned %d (%s): %s\n", x->me->rank, x->index, x->name, call,
          (int)rc, ncclGetErrorString(rc), ncclGetLastError(x->me->comm));
  return -1;
}

#define CALL(x, expr)                                                      \
  do {                                                                     \
    ncclResult_t call_rc_ = (expr);                                        \
    if (call_rc_ != ncclSuccess) return call_failed((x), #expr, call_rc_); \
  } while (0)

/* out[i] for lo <= i < hi must be the reduction over all ranks of input element idx_offset + i. */
static void check_reduced(struct case_ctx *x, const unsigned char *out, size_t lo, size_t hi, uint64_t idx_offset) {
  const size_t es = x->ti->size;
  size_t wrong = 0;
  for (size_t i = lo; i < hi; i++) {
    tc_gen_ranks(x->ti, x->cls, x->c->seed, x->me->nranks, idx_offset + i, x->inputs);
    struct tc_expected exp;
    tc_reference(&x->red, x->inputs, &exp);
    uint64_t got = tc_load_bits(out + i * es, es);
    if (!tc_accept(&x->red, &exp, got)) {
      if (wrong++ < SUITE_LINES_PER_CASE) {
        char why[192];
        tc_describe_mismatch(&x->red, &exp, got, why, sizeof(why));
        case_fail(x, "element %zu: %s", i, why);
      }
    }
  }
  if (wrong > 1) case_fail(x, "%zu of %zu checked elements wrong", wrong, hi - lo);
}

/* The part [*lo, *hi) of an output of `count` elements that this rank checks by value when every rank holds the
 * same output: a 1/N share each, so checking costs O(N) in all instead of O(N^2); the cross-rank bitwise
 * comparison extends each share's verdict to every rank. With --full-check, everything. */
static void value_check_share(const struct case_ctx *x, size_t count, size_t *lo, size_t *hi) {
  const int me = x->me->rank, n = x->me->nranks;
  if (x->me->full_check) {
    *lo = 0;
    *hi = count;
    return;
  }
  *lo = count * (size_t)me / (size_t)n;
  *hi = count * (size_t)(me + 1) / (size_t)n;
}

/* out[i] for i < count must be exactly rank src's input element idx0 + i. `what` names the region. */
static void check_copied(struct case_ctx *x, const unsigned char *out, size_t count, int src, uint64_t idx0,
                         const char *what) {
  const size_t es = x->ti->size;
  size_t wrong = 0, first = 0;
  struct tc_value v;
  for (size_t i = 0; i < count; i++) {
    tc_gen(x->ti, x->cls, x->c->seed, src, idx0 + i, &v);
    if (tc_load_bits(out + i * es, es) != v.bits && wrong++ == 0) first = i;
  }
  if (wrong) {
    tc_gen(x->ti, x->cls, x->c->seed, src, idx0 + first, &v);
    case_fail(x,
              "%s: %zu of %zu elements differ from rank %d's data; first at element %zu: got 0x%llx, expected 0x%llx",
              what, wrong, count, src, first, (unsigned long long)tc_load_bits(out + first * es, es),
              (unsigned long long)v.bits);
  }
}

static void apply_selftest_corruption(struct case_ctx *x, unsigned char *out, size_t count) {
  if (x->c->corrupt == SUITE_CORRUPT_NONE || x->me->rank != x->me->nranks - 1 || count == 0) return;
  /* the last element: inside the last rank's value-check share */
  const size_t es = x->ti->size, at = count - 1;
  uint64_t bits = tc_load_bits(out + at * es, es);
  if (x->c->corrupt == SUITE_CORRUPT_LAST_BIT) {
    bits ^= 1;
  } else if (x->ti->kind == TC_KIND_FLOAT) {
    double v = tc_float_from_bits(x->ti, bits);
    bits = tc_float_to_bits(x->ti, v >= 0 ? -(v + 8.0) : -v + 8.0);
  } else {
    bits += 1;
  }
  tc_store_bits(out + at * es, es, bits);
}

static ncclRedOp_t builtin_op(enum tc_op op) {
  switch (op) {
    case TC_OP_PROD:
      return ncclProd;
    case TC_OP_MAX:
      return ncclMax;
    case TC_OP_MIN:
      return ncclMin;
    case TC_OP_AVG:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

struct case_buffers {
  struct tc_buffer send, recv; /* in-place: only recv is used */
  int have_send;
  unsigned char *dsend, *drecv; /* --device: their GPU mirrors, which the calls are given */
};

static int alloc_buffers(struct case_ctx *x, struct case_buffers *b, size_t send_elems, size_t recv_elems) {
  const size_t es = x->ti->size;
  memset(b, 0, sizeof(*b));
  if (x->c->in_place) {
    size_t elems = send_elems > recv_elems ? send_elems : recv_elems;
    if (tc_buffer_alloc(&b->recv, elems * es)) return -1;
  } else {
    if (tc_buffer_alloc(&b->send, send_elems * es)) return -1;
    b->have_send = 1;
    if (tc_buffer_alloc(&b->recv, recv_elems * es)) {
      tc_buffer_free(&b->send);
      return -1;
    }
  }
  tc_buffer_poison(&b->recv);
  return 0;
}

static void free_buffers(struct case_buffers *b) {
  suite_device_free(b->dsend);
  suite_device_free(b->drecv);
  if (b->have_send) tc_buffer_free(&b->send);
  tc_buffer_free(&b->recv);
}

/* Issues the case's DCCL calls. `out` and `out_elems` tell the checker where this rank's result is. */
static int issue(struct case_ctx *x, struct case_buffers *b, ncclRedOp_t op) {
  const struct suite_case *c = x->c;
  const int me = x->me->rank, n = x->me->nranks;
  const size_t es = x->ti->size, count = c->count;
  const ncclDataType_t t = c->type;
  const ncclComm_t comm = x->me->comm;
  unsigned char *recv = x->me->device ? b->drecv : b->recv.data;
  unsigned char *send = !b->have_send ? recv : x->me->device ? b->dsend : b->send.data;
  switch (c->coll) {
    case SUITE_ALLREDUCE:
      CALL(x, ncclAllReduce(send, recv, count, t, op, comm, NULL));
      break;
    case SUITE_REDUCE:
      CALL(x, ncclReduce(send, recv, count, t, op, c->root, comm, NULL));
      break;
    case SUITE_BROADCAST:
      /* in-place has two spellings, ncclBcast(buf) and ncclBroadcast(buf, buf): alternate by type */
      if (c->in_place && suite_bcast_in_place_uses_bcast(c))
        CALL(x, ncclBcast(recv, count, t, c->root, comm, NULL));
      else if (c->in_place)
        CALL(x, ncclBroadcast(recv, recv, count, t, c->root, comm, NULL));
      else
        CALL(x, ncclBroadcast(send, recv, count, t, c->root, comm, NULL));
      break;
    case SUITE_ALLGATHER:
      CALL(x, ncclAllGather(c->in_place ? recv + (size_t)me * count * es : send, recv, count, t, comm, NULL));
      break;
    case SUITE_REDUCESCATTER:
      CALL(x, ncclReduceScatter(send, c->in_place ? send + (size_t)me * count * es : recv, count, t, op, comm, NULL));
      break;
    case SUITE_SENDRECV_RING:
    case SUITE_SENDRECV_PAIRS: {
      int to = c->coll == SUITE_SENDRECV_RING ? (me + 1) % n : ((me ^ 1) < n ? me ^ 1 : me);
      int from = c->coll == SUITE_SENDRECV_RING ? (me + n - 1) % n : to;
      CALL(x, ncclGroupStart());
      ncclResult_t rs = ncclSend(send, count, t, to, comm, NULL);
      ncclResult_t rr = ncclRecv(recv, count, t, from, comm, NULL);
      ncclResult_t re = ncclGroupEnd();
      if (rs != ncclSuccess) return call_failed(x, "ncclSend", rs);
      if (rr != ncclSuccess) return call_failed(x, "ncclRecv", rr);
      if (re != ncclSuccess) return call_failed(x, "ncclGroupEnd", re);
      break;
    }
    case SUITE_ALLTOALL: {
      /* Every send is posted before any receive: the library must not need the receive to make progress. */
      CALL(x, ncclGroupStart());
      ncclResult_t first_rc = ncclSuccess;
      for (int p = 0; p < n && first_rc == ncclSuccess; p++)
        first_rc = ncclSend(send + (size_t)p * count * es, count, t, p, comm, NULL);
      for (int p = 0; p < n && first_rc == ncclSuccess; p++)
        first_rc = ncclRecv(recv + (size_t)p * count * es, count, t, p, comm, NULL);
      ncclResult_t re = ncclGroupEnd();
      if (first_rc != ncclSuccess) return call_failed(x, "ncclSend/ncclRecv", first_rc);
      if (re != ncclSuccess) return call_failed(x, "ncclGroupEnd", re);
      break;
    }
    default:
      break;
  }
  return 0;
}

/* Fills the input buffers the way case `c` needs them. */
static void fill_inputs(struct case_ctx *x, struct case_buffers *b) {
  const struct suite_case *c = x->c;
  const int me = x->me->rank, n = x->me->nranks;
  const size_t es = x->ti->size, count = c->count;
  unsigned char *send = b->have_send ? b->send.data : b->recv.data;
  switch (c->coll) {
    case SUITE_BROADCAST:
      /* in-place: only the root's buffer holds data; out-of-place: every send buffer does (only the root's counts) */
      if (!c->in_place || me == c->root) tc_fill(send, x->ti, x->cls, c->seed, c->in_place ? c->root : me, 0, count);
      break;
    case SUITE_ALLGATHER:
      tc_fill(c->in_place ? b->recv.data + (size_t)me * count * es : send, x->ti, x->cls, c->seed, me, 0, count);
      break;
    case SUITE_REDUCESCATTER:
    case SUITE_ALLTOALL:
      tc_fill(send, x->ti, x->cls, c->seed, me, 0, (size_t)n * count);
      break;
    default:
      tc_fill(send, x->ti, x->cls, c->seed, me, 0, count);
      break;
  }
}

/* Checks this rank's output; returns where the output is (for the hash) through out/out_bytes. */
static void check_outputs(struct case_ctx *x, struct case_buffers *b, const unsigned char **out, size_t *out_bytes) {
  const struct suite_case *c = x->c;
  const int me = x->me->rank, n = x->me->nranks;
  const size_t es = x->ti->size, count = c->count;
  unsigned char *recv = b->recv.data;
  *out = recv;
  *out_bytes = count * es;
  switch (c->coll) {
    case SUITE_ALLREDUCE: {
      apply_selftest_corruption(x, recv, count);
      size_t lo, hi;
      value_check_share(x, count, &lo, &hi);
      check_reduced(x, recv, lo, hi, 0);
      break;
    }
    case SUITE_REDUCE:
      if (me == c->root) {
        check_reduced(x, recv, 0, count, 0);
      } else if (c->in_place) {
        size_t at = tc_first_input_mismatch(recv, x->ti, x->cls, c->seed, me, 0, count);
        if (at != count) case_fail(x, "non-root in-place buffer was changed (element %zu)", at);
      } else {
        size_t at = tc_buffer_first_written(&b->recv, 0, count * es);
        if (at != (size_t)-1) case_fail(x, "non-root receive buffer was written (byte %zu)", at);
      }
      break;
    case SUITE_BROADCAST:
      apply_selftest_corruption(x, recv, count);
      check_copied(x, recv, count, c->root, 0, "broadcast data");
      break;
    case SUITE_ALLGATHER:
      *out_bytes = (size_t)n * count * es;
      for (int r = 0; r < n; r++) {
        /* one block per rank (the next rank's, so it has travelled), unless --full-check */
        if (!x->me->full_check && r != (me + 1) % n) continue;
        char what[48];
        snprintf(what, sizeof(what), "block of rank %d", r);
        check_copied(x, recv + (size_t)r * count * es, count, r, 0, what);
      }
      break;
    case SUITE_REDUCESCATTER:
      if (c->in_place) *out = recv + (size_t)me * count * es;
      check_reduced(x, *out, 0, count, (uint64_t)me * count);
      break;
    case SUITE_SENDRECV_RING:
      check_copied(x, recv, count, (me + n - 1) % n, 0, "received from the previous rank");
      break;
    case SUITE_SENDRECV_PAIRS:
      check_copied(x, recv, count, (me ^ 1) < n ? me ^ 1 : me, 0, "received from the partner");
      break;
    case SUITE_ALLTOALL:
      *out_bytes = (size_t)n * count * es;
      for (int p = 0; p < n; p++) {
        char what[48];
        snprintf(what, sizeof(what), "block from rank %d", p);
        check_copied(x, recv + (size_t)p * count * es, count, p, (uint64_t)me * count, what);
      }
      break;
    default:
      break;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_one(struct case_ctx *x, struct suite_record *rec) {
  const struct suite_case *c = x->c;
  const int n = x->me->nranks;
  size_t send_elems = c->count, recv_elems = c->count;
  if (c->coll == SUITE_ALLGATHER) recv_elems *= (size_t)n;
  if (c->coll == SUITE_REDUCESCATTER) send_elems *= (size_t)n;
  if (c->coll == SUITE_ALLTOALL) send_elems = recv_elems = (size_t)n * c->count;

  struct case_buffers b;
  if (alloc_buffers(x, &b, send_elems, recv_elems)) {
    fprintf(stderr, "rank %d: case #%zu (%s): out of memory\n", x->me->rank, x->index, x->name);
    return -1;
  }
  fill_inputs(x, &b);
  const uint64_t send_hash = b.have_send ? tc_hash(b.send.data, b.send.bytes) : 0;
  if (x->me->device && ((b.have_send && !(b.dsend = suite_device_mirror(&b.send))) ||
                        !(b.drecv = suite_device_mirror(&b.recv)))) {
    free_buffers(&b);
    return -1;
  }

  ncclRedOp_t op = builtin_op(c->op);
  int created_op = 0;
  if (suite_coll_is_reduction(c->coll) && c->op == TC_OP_PREMULSUM) {
    unsigned char scalar[8];
    tc_store_bits(scalar, x->ti->size, x->red.scalar.bits);
    ncclResult_t rc = ncclRedOpCreatePreMulSum(&op, scalar, c->type, ncclScalarHostImmediate, x->me->comm);
    if (rc != ncclSuccess) {
      free_buffers(&b);
      return call_failed(x, "ncclRedOpCreatePreMulSum", rc);
    }
    created_op = 1;
  }
  const double call_start = now_s();
  int rc = issue(x, &b, op);
  const double call_s = now_s() - call_start;
  if (created_op) {
    ncclResult_t drc = ncclRedOpDestroy(op, x->me->comm);
    if (rc == 0 && drc != ncclSuccess) rc = call_failed(x, "ncclRedOpDestroy", drc);
  }
  if (rc == 0 && x->me->device &&
      ((b.have_send && suite_device_copy_back(&b.send, b.dsend)) || suite_device_copy_back(&b.recv, b.drecv)))
    rc = -1;
  if (rc) {
    free_buffers(&b);
    return rc;
  }

  const unsigned char *out;
  size_t out_bytes;
  check_outputs(x, &b, &out, &out_bytes);
  if (b.have_send && tc_hash(b.send.data, b.send.bytes) != send_hash)
    case_fail(x, "the send buffer of an out-of-place call was modified");
  if (b.have_send && !tc_buffer_guards_ok(&b.send)) case_fail(x, "write outside the send buffer (guard zone changed)");
  if (!tc_buffer_guards_ok(&b.recv)) case_fail(x, "write outside the receive buffer (guard zone changed)");
  rec->output_hash = tc_hash(out, out_bytes);
  if (x->me->verbose)
    printf("rank %d: case #%zu (%s): call %.3f s, check %.3f s\n", x->me->rank, x->index, x->name, call_s,
           now_s() - call_start - call_s);
  rec->status = x->bad ? SUITE_BAD : SUITE_OK;
  free_buffers(&b);
  return 0;
}

int suite_run_cases(const struct suite_rank *me, const struct suite_case *cases, size_t n,
                    struct suite_record *records) {
  struct tc_value *inputs = calloc((size_t)me->nranks, sizeof(*inputs));
  if (!inputs) return -1;
  memset(records, 0, n * sizeof(*records));
  double group_start = now_s();
  size_t group_first = 0;
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    struct case_ctx x = {0};
    x.me = me;
    x.c = &cases[i];
    x.index = i;
    x.ti = tc_type(cases[i].type);
    x.cls = suite_coll_is_reduction(cases[i].coll) ? tc_op_input_class(cases[i].op) : TC_INPUT_BITS;
    struct tc_value scalar;
    tc_premul_scalar(x.ti, cases[i].seed, &scalar);
    tc_reduction_init(&x.red, x.ti, cases[i].op, me->nranks, &scalar);
    x.inputs = inputs;
    suite_case_name(&cases[i], x.name, sizeof(x.name));
    char step[224];
    snprintf(step, sizeof(step), "case #%zu (%s)", i, x.name);
    suite_watchdog_enter(step);
    rc = run_one(&x, &records[i]);
    suite_watchdog_idle();
    if (me->rank == 0 && (i + 1 == n || cases[i + 1].coll != cases[i].coll)) {
      printf("rank 0: %-15s %5zu cases run in %7.2f s\n", suite_coll_name(cases[i].coll), i + 1 - group_first,
             now_s() - group_start);
      fflush(stdout);
      group_start = now_s();
      group_first = i + 1;
    }
  }
  free(inputs);
  if (rc) {
    fprintf(stderr, "rank %d: aborting the communicator; the remaining cases are not run\n", me->rank);
    ncclCommAbort(me->comm);
  }
  return rc;
}
