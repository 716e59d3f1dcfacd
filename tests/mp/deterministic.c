/* Deterministic mode (DCCL_DETERMINISTIC=1): reductions give the same bits whatever the algorithm asked for, the
 * channels, the chunk size, the transport and the placement of the ranks, and all three reductions agree.
 *
 * For each configuration the parent forks nranks ranks (each sets the configuration's environment before its
 * first DCCL call), and every rank runs, for float32, float16, bfloat16 and float64 x sum, avg, prod and premulsum
 * (scalar 0.37) x two sizes (one under the one-shot's 64 KiB, one over): an all-reduce, a reduce to a root that
 * moves with the case, and a reduce-scatter of the same input. Inputs are pseudo-random values in [-1, 1) (every
 * order of summation rounds differently). Checked:
 * - every rank's all-reduce output, each reduce's root output and each rank's reduce-scatter block have the same
 *   hash in every configuration;
 * - on every rank: the reduce-scatter block and the reduce's output equal the all-reduce's bits;
 * - float32 and float64 sums equal the sum computed here in rank order (((x0 + x1) + x2) + ...).
 * Without deterministic mode the same configurations are run once more, and how many cases then differ between
 * them is printed (information: it shows the checks would see a difference).
 * Usage: test_deterministic [nranks=4]
 * Exit codes: 0 all passed, 1 a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dccl.h"
#include "fault_harness.h"
#include "tc_data.h"
#include "tc_types.h"

#define MAX_RANKS 8
#define NTYPES 4
#define NOPS 4
#define NSIZES 2
#define NCASES (NTYPES * NOPS * NSIZES)
#define NCONFIGS 4

static const ncclDataType_t types[NTYPES] = {ncclFloat32, ncclFloat16, ncclBfloat16, ncclFloat64};
static const char *const op_names[NOPS] = {"sum", "avg", "prod", "premulsum"};
static const size_t per_rank[NSIZES] = {250, 75001}; /* reduce-scatter blocks; the all-reduce has nranks times */

struct config {
  const char *name;
  const char *env[4];
  int hostid; /* DCCL_HOSTID A/B by rank half: two pretend hosts */
};
static const struct config configs[NCONFIGS] = {
    {"defaults", {NULL}, 0},
    {"DCCL_ALGO=ring, 4 channels, 8 KiB chunks", {"DCCL_ALGO=ring", "DCCL_NCHANNELS=4", "DCCL_CHUNK_SIZE=8192"}, 0},
    {"DCCL_ALGO=tree over sockets, 64 KiB chunks",
     {"DCCL_ALGO=tree", "DCCL_TRANSPORT=socket", "DCCL_CHUNK_SIZE=65536"},
     0},
    {"DCCL_ALGO=oneshot, two pretend hosts", {"DCCL_ALGO=oneshot"}, 1},
};

struct result {
  uint64_t allreduce, reduce, reducescatter; /* hashes (reduce: at the root only) */
  int agree;                                 /* the reduce-scatter block and the reduce output equal the all-reduce's */
  int sum_in_order;                          /* float32/float64 sum: equal to the rank-order sum (-1: not checked) */
  int ok;                                    /* every call succeeded */
};

struct shared {
  ncclUniqueId id;
  int nranks, config, deterministic;
  struct result res[2][NCONFIGS][NCASES][MAX_RANKS];
};

static double value(int rank, size_t i, int c) {
  uint64_t h = tc_mix64(((uint64_t)c << 48) ^ ((uint64_t)rank << 40) ^ i);
  return (double)(h >> 11) / (double)(1ull << 53) * 2 - 1;
}

static void fill(const struct tc_type_info *ti, void *buf, size_t n, int rank, int c) {
  for (size_t i = 0; i < n; i++)
    tc_store_bits((char *)buf + i * ti->size, ti->size, tc_float_to_bits(ti, value(rank, i, c)));
}

/* The float32 / float64 sum in rank order, element by element, compared with `out`. */
static int sum_in_rank_order(const struct tc_type_info *ti, const void *out, size_t n, int nranks, int c) {
  for (size_t i = 0; i < n; i++) {
    if (ti->type == ncclFloat32) {
      float acc = (float)value(0, i, c);
      for (int r = 1; r < nranks; r++) acc += (float)value(r, i, c);
      if (memcmp(&acc, (const float *)out + i, 4)) return 0;
    } else {
      double acc = value(0, i, c);
      for (int r = 1; r < nranks; r++) acc += value(r, i, c);
      if (memcmp(&acc, (const double *)out + i, 8)) return 0;
    }
  }
  return 1;
}

static int run_case(ncclComm_t comm, int rank, int nranks, int c, struct result *res) {
  const struct tc_type_info *ti = tc_type(types[c / (NOPS * NSIZES)]);
  int op_index = c / NSIZES % NOPS, root = c % nranks;
  size_t block = per_rank[c % NSIZES], n = block * (size_t)nranks, bytes = n * ti->size;
  char *in = malloc(bytes), *ar = malloc(bytes), *red = malloc(bytes), *rs = malloc(block * ti->size);
  if (!in || !ar || !red || !rs) return 0;
  fill(ti, in, n, rank, c);
  ncclRedOp_t op = op_index == 0 ? ncclSum : op_index == 1 ? ncclAvg : ncclProd;
  if (op_index == 3) {
    char scalar[8];
    tc_store_bits(scalar, ti->size, tc_float_to_bits(ti, 0.37));
    if (ncclRedOpCreatePreMulSum(&op, scalar, ti->type, ncclScalarHostImmediate, comm) != ncclSuccess) return 0;
  }
  res->ok = ncclAllReduce(in, ar, n, ti->type, op, comm, NULL) == ncclSuccess &&
            ncclReduce(in, red, n, ti->type, op, root, comm, NULL) == ncclSuccess &&
            ncclReduceScatter(in, rs, block, ti->type, op, comm, NULL) == ncclSuccess;
  if (!res->ok) fprintf(stderr, "rank %d, case %d: %s\n", rank, c, ncclGetLastError(comm));
  if (op_index == 3) ncclRedOpDestroy(op, comm);
  res->allreduce = tc_hash(ar, bytes);
  res->reduce = rank == root ? tc_hash(red, bytes) : 0;
  res->reducescatter = tc_hash(rs, block * ti->size);
  res->agree = !memcmp(rs, ar + (size_t)rank * block * ti->size, block * ti->size) &&
               (rank != root || !memcmp(red, ar, bytes));
  res->sum_in_order = op_index == 0 && ti->size >= 4 ? sum_in_rank_order(ti, ar, n, nranks, c) : -1;
  free(in);
  free(ar);
  free(red);
  free(rs);
  return res->ok;
}

static int rank_main(void *arg, int rank) {
  struct shared *sh = arg;
  const struct config *cfg = &configs[sh->config];
  setenv("DCCL_DETERMINISTIC", sh->deterministic ? "1" : "0", 1);
  for (int i = 0; i < 4 && cfg->env[i]; i++) putenv((char *)cfg->env[i]);
  if (cfg->hostid) setenv("DCCL_HOSTID", rank < sh->nranks / 2 ? "A" : "B", 1);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, sh->nranks, sh->id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return 3;
  }
  for (int c = 0; c < NCASES; c++)
    if (!run_case(comm, rank, sh->nranks, c, &sh->res[sh->deterministic][sh->config][c][rank])) return 4;
  ncclCommDestroy(comm);
  return 0;
}

static const char *case_name(int c, int nranks, char *buf, size_t len) {
  snprintf(buf, len, "%s %s, %zu elements", tc_type(types[c / (NOPS * NSIZES)])->name, op_names[c / NSIZES % NOPS],
           per_rank[c % NSIZES] * (size_t)nranks);
  return buf;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int nranks = argc > 1 ? atoi(argv[1]) : 4;
  if (nranks < 2 || nranks > MAX_RANKS) return 2;
  struct shared *sh = fh_shared_alloc(sizeof(*sh));
  sh->nranks = nranks;
  for (int det = 1; det >= 0; det--)
    for (int k = 0; k < NCONFIGS; k++) {
      sh->config = k;
      sh->deterministic = det;
      if (fh_unique_id(&sh->id) != ncclSuccess) return 1;
      int status[MAX_RANKS];
      fh_run_ranks(rank_main, sh, nranks, 120, status, NULL);
      for (int r = 0; r < nranks; r++) {
        char sbuf[64];
        FH_EXPECT(fh_status_ok(status[r]), "%s, %s: rank %d: %s", det ? "deterministic" : "default",
                  configs[k].name, r, fh_status_str(status[r], sbuf, sizeof(sbuf)));
      }
    }
  char name[96];
  int differ_default = 0;
  for (int c = 0; c < NCASES; c++) {
    case_name(c, nranks, name, sizeof(name));
    int root = c % nranks;
    for (int k = 0; k < NCONFIGS; k++)
      for (int r = 0; r < nranks; r++) {
        const struct result *x = &sh->res[1][k][c][r], *ref = &sh->res[1][0][c][0];
        const struct result *ref_r = &sh->res[1][0][c][r];
        FH_EXPECT(x->ok, "%s, %s: rank %d's calls failed", name, configs[k].name, r);
        FH_EXPECT(x->allreduce == ref->allreduce, "%s: all-reduce bits of rank %d under \"%s\" differ from rank 0's "
                  "under \"%s\"", name, r, configs[k].name, configs[0].name);
        FH_EXPECT(x->reducescatter == ref_r->reducescatter, "%s: rank %d's reduce-scatter block under \"%s\" differs "
                  "from \"%s\"", name, r, configs[k].name, configs[0].name);
        FH_EXPECT(r != root || x->reduce == sh->res[1][0][c][root].reduce, "%s: the reduce at rank %d under \"%s\" "
                  "differs from \"%s\"", name, r, configs[k].name, configs[0].name);
        FH_EXPECT(x->agree, "%s, %s: rank %d's reduce-scatter block or reduce output differs from its all-reduce",
                  name, configs[k].name, r);
        FH_EXPECT(x->sum_in_order != 0, "%s, %s: rank %d's sum is not the sum in rank order", name, configs[k].name, r);
      }
    for (int k = 1; k < NCONFIGS; k++) differ_default += sh->res[0][k][c][0].allreduce != sh->res[0][0][c][0].allreduce;
  }
  printf("deterministic mode, %d ranks, %d cases x %d configurations: %s\n", nranks, NCASES, NCONFIGS,
         fh_failures ? "FAILED" : "every result has the same bits");
  printf("without it: %d of %d (case, configuration) pairs give other all-reduce bits than the defaults\n",
         differ_default, NCASES * (NCONFIGS - 1));
  return fh_failures ? 1 : 0;
}
