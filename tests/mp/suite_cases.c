/* The case matrix: collective x type x op x size x placement x root, plus the 64 MiB cases, the all-to-all
 * case and the self-test's planted corruptions. */
#include <stdio.h>
#include <stdlib.h>

#include "suite.h"

static const char *const suite_coll_names[SUITE_NUM_COLLS] = {
    "allreduce", "broadcast", "reduce", "allgather", "reducescatter", "sendrecv_ring", "sendrecv_pairs", "alltoall"};

const char *suite_coll_name(enum suite_coll coll) {
  return (unsigned)coll < SUITE_NUM_COLLS ? suite_coll_names[coll] : "?";
}

int suite_coll_is_reduction(enum suite_coll coll) {
  return coll == SUITE_ALLREDUCE || coll == SUITE_REDUCE || coll == SUITE_REDUCESCATTER;
}

int suite_coll_has_root(enum suite_coll coll) {
  return coll == SUITE_BROADCAST || coll == SUITE_REDUCE;
}

int suite_coll_outputs_agree(enum suite_coll coll) {
  return coll == SUITE_ALLREDUCE || coll == SUITE_BROADCAST || coll == SUITE_ALLGATHER;
}

int suite_bcast_in_place_uses_bcast(const struct suite_case *c) {
  return c->type % 2 == 0;
}

void suite_case_name(const struct suite_case *c, char *buf, size_t len) {
  int n = snprintf(buf, len, "%s %s", suite_coll_name(c->coll), tc_type(c->type)->name);
  if (suite_coll_is_reduction(c->coll) && n >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - n, " %s", tc_op_name(c->op));
  if (n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - n, " count=%zu", c->count);
  if (c->coll != SUITE_SENDRECV_RING && c->coll != SUITE_SENDRECV_PAIRS && c->coll != SUITE_ALLTOALL && n >= 0 &&
      (size_t)n < len)
    n += snprintf(buf + n, len - n, " %s",
                  !c->in_place                         ? "out-of-place"
                  : c->coll != SUITE_BROADCAST         ? "in-place"
                  : suite_bcast_in_place_uses_bcast(c) ? "in-place (ncclBcast)"
                                                       : "in-place (ncclBroadcast)");
  if (c->root >= 0 && n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - n, " root=%d", c->root);
  if (c->corrupt != SUITE_CORRUPT_NONE && n >= 0 && (size_t)n < len)
    snprintf(buf + n, len - n, " [selftest: %s corruption]", c->corrupt == SUITE_CORRUPT_GROSS ? "gross" : "last-bit");
}

struct case_list {
  struct suite_case *items;
  size_t n, cap;
  uint64_t seed;
};

static int case_list_add(struct case_list *l, enum suite_coll coll, ncclDataType_t type, enum tc_op op, size_t count,
                         int in_place, int root, enum suite_corruption corrupt) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    struct suite_case *grown = realloc(l->items, cap * sizeof(*grown));
    if (!grown) return -1;
    l->items = grown;
    l->cap = cap;
  }
  struct suite_case *c = &l->items[l->n++];
  c->coll = coll;
  c->type = type;
  c->op = op;
  c->count = count;
  c->in_place = in_place;
  c->root = root;
  c->corrupt = corrupt;
  /* The seed depends on what the case is, not on where it sits in the list: a failure reproduces alone. */
  uint64_t s = l->seed;
  s = tc_seed_combine(s, (uint64_t)coll);
  s = tc_seed_combine(s, (uint64_t)type);
  s = tc_seed_combine(s, (uint64_t)op);
  s = tc_seed_combine(s, (uint64_t)count);
  s = tc_seed_combine(s, (uint64_t)in_place);
  s = tc_seed_combine(s, (uint64_t)(root + 1));
  c->seed = s;
  return 0;
}

/* Distinct roots among 0, the middle rank and the last rank. */
static int suite_roots(int nranks, int roots[3]) {
  int candidates[3] = {0, nranks / 2, nranks - 1}, n = 0;
  for (int i = 0; i < 3; i++) {
    int seen = 0;
    for (int j = 0; j < n; j++) seen |= roots[j] == candidates[i];
    if (!seen) roots[n++] = candidates[i];
  }
  return n;
}

#define SUITE_ALL_ROOTS_MAX 65536

static int add_matrix(const struct suite_options *opt, int nranks, struct case_list *l) {
  for (int coll = 0; coll < SUITE_ALLTOALL; coll++) {
    if (!(opt->colls_mask & (1u << coll))) continue;
    const int reduction = suite_coll_is_reduction((enum suite_coll)coll);
    const int is_p2p = coll == SUITE_SENDRECV_RING || coll == SUITE_SENDRECV_PAIRS;
    int roots[3] = {-1, -1, -1};
    int nroots = suite_coll_has_root((enum suite_coll)coll) ? suite_roots(nranks, roots) : 1;
    for (int type = 0; type < ncclNumTypes; type++) {
      if (!(opt->types_mask & (1u << type))) continue;
      for (int op = 0; op < (reduction ? TC_NUM_OPS : 1); op++) {
        if (reduction && !(opt->ops_mask & (1u << op))) continue;
        for (int s = 0; s < opt->nsizes; s++) {
          for (int in_place = 0; in_place < 2; in_place++) {
            if (!(opt->placements & (1 << in_place))) continue;
            if (is_p2p && in_place) continue; /* a send and a receive of one buffer is not a meaningful case */
            /* Every root for sizes up to SUITE_ALL_ROOTS_MAX; above it one root per case, rotating with type,
             * op and placement so each root still meets large messages (the CI time budget). */
            const int all_roots = opt->all_roots || opt->sizes[s] <= SUITE_ALL_ROOTS_MAX;
            const int rotate = (type * 7 + op * 3 + in_place) % nroots;
            for (int r = 0; r < nroots; r++) {
              if (!all_roots && r != rotate) continue;
              if (case_list_add(l, (enum suite_coll)coll, (ncclDataType_t)type, reduction ? (enum tc_op)op : TC_OP_SUM,
                                opt->sizes[s], in_place, roots[r], SUITE_CORRUPT_NONE))
                return -1;
            }
          }
        }
      }
    }
  }
  return 0;
}

#define SUITE_64MIB ((size_t)64 << 20)

static int add_big(const struct suite_options *opt, int nranks, struct case_list *l) {
  const struct {
    enum suite_coll coll;
    ncclDataType_t type;
    enum tc_op op;
    size_t count;
  } big[] = {
      {SUITE_ALLREDUCE, ncclFloat32, TC_OP_SUM, SUITE_64MIB / 4},
      {SUITE_ALLREDUCE, ncclInt32, TC_OP_MAX, SUITE_64MIB / 4},
      {SUITE_ALLGATHER, ncclUint8, TC_OP_SUM, SUITE_64MIB / (size_t)nranks},            /* 64 MiB gathered */
      {SUITE_REDUCESCATTER, ncclBfloat16, TC_OP_SUM, SUITE_64MIB / 2 / (size_t)nranks}, /* 64 MiB scattered */
  };
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
    if (!(opt->colls_mask & (1u << big[i].coll))) continue;
    if (case_list_add(l, big[i].coll, big[i].type, big[i].op, big[i].count, 0, -1, SUITE_CORRUPT_NONE)) return -1;
  }
  return 0;
}

static int add_selftest(struct case_list *l) {
  /* A clean control, then corruptions the value check and the bitwise comparison must each catch. */
  if (case_list_add(l, SUITE_ALLREDUCE, ncclFloat32, TC_OP_SUM, 1000, 0, -1, SUITE_CORRUPT_NONE)) return -1;
  if (case_list_add(l, SUITE_ALLREDUCE, ncclFloat32, TC_OP_SUM, 1000, 0, -1, SUITE_CORRUPT_GROSS)) return -1;
  if (case_list_add(l, SUITE_ALLREDUCE, ncclInt32, TC_OP_SUM, 1000, 1, -1, SUITE_CORRUPT_GROSS)) return -1;
  if (case_list_add(l, SUITE_BROADCAST, ncclBfloat16, TC_OP_SUM, 1000, 0, 0, SUITE_CORRUPT_GROSS)) return -1;
  if (case_list_add(l, SUITE_ALLREDUCE, ncclFloat64, TC_OP_SUM, 1000, 0, -1, SUITE_CORRUPT_LAST_BIT)) return -1;
  return 0;
}

int suite_build_cases(const struct suite_options *opt, int nranks, struct suite_case **cases, size_t *ncases) {
  struct case_list l = {NULL, 0, 0, opt->seed};
  int rc;
  if (opt->selftest) {
    rc = add_selftest(&l);
  } else if (opt->alltoall_64m) {
    rc = case_list_add(&l, SUITE_ALLTOALL, ncclUint64, TC_OP_SUM, SUITE_64MIB / 8, 0, -1, SUITE_CORRUPT_NONE);
  } else {
    rc = add_matrix(opt, nranks, &l);
    if (rc == 0 && opt->big) rc = add_big(opt, nranks, &l);
  }
  if (rc) {
    free(l.items);
    return -1;
  }
  *cases = l.items;
  *ncases = l.n;
  return 0;
}
