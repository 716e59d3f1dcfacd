/* The multi-process collective suite: the case matrix, how one case runs and is checked on one rank, and how
 * the records of all ranks are judged. The launchers (MPI or fork) in coll_suite.c only move records around. */
#ifndef DCCL_TEST_SUITE_H_
#define DCCL_TEST_SUITE_H_

#include <stddef.h>
#include <stdint.h>

#include "dccl.h"
#include "tc_check.h"

enum suite_coll {
  SUITE_ALLREDUCE,
  SUITE_BROADCAST,
  SUITE_REDUCE,
  SUITE_ALLGATHER,
  SUITE_REDUCESCATTER,
  SUITE_SENDRECV_RING,  /* group: send to rank+1, receive from rank-1 */
  SUITE_SENDRECV_PAIRS, /* group: exchange with rank^1 (the odd one out exchanges with itself) */
  SUITE_ALLTOALL,       /* group: all sends posted before any receive; count elements per peer */
  SUITE_NUM_COLLS
};

/* Selftest corruption, applied to the output on the last rank after the call and before the checks. */
enum suite_corruption { SUITE_CORRUPT_NONE, SUITE_CORRUPT_GROSS, SUITE_CORRUPT_LAST_BIT };

struct suite_case {
  enum suite_coll coll;
  ncclDataType_t type;
  enum tc_op op; /* reductions only */
  size_t count;  /* elements per rank (allgather: sent; reduce-scatter: received; alltoall: per peer) */
  int in_place;
  int root; /* broadcast and reduce; -1 otherwise */
  uint64_t seed;
  enum suite_corruption corrupt;
};

/* What one rank found for one case. */
enum suite_status { SUITE_NOT_RUN = 0, SUITE_OK = 1, SUITE_BAD = 2 };
struct suite_record {
  uint64_t output_hash; /* of the whole output, for the cross-rank bitwise comparison */
  int32_t status;       /* enum suite_status */
  int32_t reserved;
};

struct suite_options {
  const char *algo; /* "ring", "tree", "oneshot" or NULL (the library's cost model chooses) */
  int fork_ranks;   /* > 0: fork mode with this many ranks; 0: MPI */
  int alltoall_64m;
  int selftest;
  int quick;
  unsigned colls_mask, types_mask, ops_mask; /* bit per suite_coll / ncclDataType_t / tc_op */
  size_t sizes[16];
  int nsizes;
  int big;        /* add the 64 MiB cases */
  int placements; /* bit 0: out-of-place, bit 1: in-place */
  uint64_t seed;
  int case_timeout_s; /* a case running longer than this is reported as a hang and the rank exits */
  int total_timeout_s;
  int verbose;
  int list_only;
  int all_roots;  /* every root at every size (default: large sizes rotate through the roots) */
  int full_check; /* every rank checks its whole output by value (default: a 1/N share where outputs agree) */
  int device;     /* buffers in GPU memory */
};

/* Parses argv; prints usage and returns -1 on a bad option. */
int suite_parse_options(int argc, char **argv, struct suite_options *opt);

const char *suite_coll_name(enum suite_coll coll);
int suite_coll_is_reduction(enum suite_coll coll);
int suite_coll_has_root(enum suite_coll coll);
/* Whether every rank's output must be bitwise equal to rank 0's. */
int suite_coll_outputs_agree(enum suite_coll coll);
/* In-place broadcast cases alternate between ncclBcast(buf) and ncclBroadcast(buf, buf). */
int suite_bcast_in_place_uses_bcast(const struct suite_case *c);
void suite_case_name(const struct suite_case *c, char *buf, size_t len);

/* Builds the case list for nranks (malloc'd); the list is the same on every rank. -1 on out of memory. */
int suite_build_cases(const struct suite_options *opt, int nranks, struct suite_case **cases, size_t *ncases);

/* One rank's view while it runs cases. */
struct suite_rank {
  ncclComm_t comm;
  int rank, nranks;
  int verbose;
  int full_check;
  int device; /* buffers in GPU memory (suite_device.h) */
};

/* Runs cases[0..n) in order and fills records[0..n). Returns 0, or -1 when a DCCL call failed: then the
 * communicator has been aborted, the failure printed, and the remaining records are left SUITE_NOT_RUN. */
int suite_run_cases(const struct suite_rank *me, const struct suite_case *cases, size_t n,
                    struct suite_record *records);

/* Judges the records of all ranks (records[rank * ncases + i]), prints failures and the summary line
 * "P passed, F failed", and returns F. */
size_t suite_report(const struct suite_case *cases, size_t ncases, const struct suite_record *records, int nranks);
/* The same for a --selftest run: checks that each planted corruption was caught by the checks that should
 * catch it. */
size_t suite_report_selftest(const struct suite_case *cases, size_t ncases, const struct suite_record *records,
                             int nranks);

/* A thread that ends the process (exit code 124) when one case runs longer than timeout_s, after printing
 * which case it was stuck in. */
void suite_watchdog_start(int rank, int timeout_s);
/* Starts the clock on one step; `what` is copied and printed if the step hangs. */
void suite_watchdog_enter(const char *what);
void suite_watchdog_idle(void);

#endif
