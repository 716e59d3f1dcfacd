/* ncclCommSplit and ncclCommShrink: a new communicator over some ranks of a parent. A split learns every rank's
 * color and key over the parent's bootstrap (so every parent rank takes part); a shrink knows its members from the
 * exclusion list, so the excluded ranks need not call it (they may be dead). Both run on the calling thread, or,
 * for a nonblocking config, on a thread of their own while the call returns ncclInProgress. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/comm_async.h"
#include "core/comm_init.h"
#include "core/comm_registry.h"
#include "util/clock.h"
#include "util/cuda_driver.h"
#include "util/error.h"
#include "util/log.h"

struct split_task {
  struct dccl_comm *parent;
  struct dccl_comm *child; /* NULL: this rank takes part but joins nothing (NCCL_SPLIT_NOCOLOR, or excluded) */
  int color, key;
  int shrink;   /* members are the parent's ranks minus `excluded` */
  int abort_parent; /* NCCL_SHRINK_ABORT: the parent was revoked; its stopped operations end before the ranks meet */
  int *excluded; /* nexcluded parent ranks (a copy) */
  int nexcluded;
};

static int is_excluded(const struct split_task *t, int rank) {
  for (int i = 0; i < t->nexcluded; i++)
    if (t->excluded[i] == rank) return 1;
  return 0;
}

/* Split: members have this rank's color, ordered by (key, parent rank). Every parent rank takes part. */
static ncclResult_t split_members(struct split_task *t, int *members, int *m) {
  struct dccl_comm *comm = t->parent;
  int n = comm->nranks;
  int(*ck)[3] = calloc((size_t)n, sizeof(*ck));
  if (!ck) return dccl_error(ncclSystemError, "out of memory");
  ck[comm->rank][0] = t->color;
  ck[comm->rank][1] = t->key;
  ck[comm->rank][2] = comm->rank;
  ncclResult_t res = dccl_bootstrap_allgather(comm->bootstrap, ck, sizeof(*ck));
  *m = 0;
  for (int r = 0; r < n && res == ncclSuccess && t->child; r++) {
    if (ck[r][0] != t->color) continue;
    int j = (*m)++; /* insertion sort: n is the rank count */
    while (j > 0 && (ck[members[j - 1]][1] > ck[r][1] || (ck[members[j - 1]][1] == ck[r][1] && members[j - 1] > r))) {
      members[j] = members[j - 1];
      j--;
    }
    members[j] = r;
  }
  free(ck);
  return res;
}

/* Joins the new communicator's bootstrap and creates it. */
static ncclResult_t join_child(struct split_task *t, const int *members, int m) {
  struct dccl_comm *parent = t->parent, *child = t->child;
  int me = -1;
  for (int i = 0; i < m; i++)
    if (members[i] == parent->rank) me = i;
  child->rank = me;
  child->nranks = m;
  child->hostid_entry = parent->hostid_entry ? parent->hostid_entry : parent->rank + 1;
  DCCLCHECK(dccl_bootstrap_split(parent->bootstrap, me, m, members, &child->bootstrap));
  dccl_bootstrap_set_abort_flag(child->bootstrap, &child->abort_flag);
  dccl_log_set_rank(me);
  DCCLCHECK(dccl_comm_init_from_bootstrap(child));
  if (child->nonblocking) DCCLCHECK(dccl_progress_thread_start(child));
  return ncclSuccess;
}

/* NCCL_SHRINK_ABORT: the parent's stopped operations end (kernels exit at their next check of the abort word)
 * before the members meet; one that never ends (a kernel queued behind a stuck one) does not hold the shrink. */
static void wait_parent_quiet(struct dccl_comm *parent) {
  int64_t give_up = dccl_now_ns() + 10 * 1000000000ll;
  while (!dccl_comm_quiescent(parent) && dccl_now_ns() < give_up) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (!dccl_comm_quiescent(parent))
    DCCL_WARN(DCCL_INIT, "ncclCommShrink(NCCL_SHRINK_ABORT): the parent's operations still run after 10 s; "
                         "shrinking all the same");
}

static ncclResult_t split_run(struct split_task *t) {
  struct dccl_comm *parent = t->parent;
  int n = parent->nranks, m = 0;
  int *members = calloc((size_t)n, sizeof(int));
  if (!members) return dccl_error(ncclSystemError, "out of memory");
  if (t->abort_parent) wait_parent_quiet(parent);
  /* A stopped parent (failed, or revoked) has its abort flag set, which its bootstrap's waits obey: a shrink, or
   * any split of a revoked parent, has them answer to the child's flag instead while the ranks meet. */
  _Atomic int none = 0; /* a rank that joins nothing */
  int borrow = atomic_load(&parent->abort_flag) && (t->shrink || atomic_load(&parent->revoked));
  if (borrow) dccl_bootstrap_set_abort_flag(parent->bootstrap, t->child ? &t->child->abort_flag : &none);
  ncclResult_t res = ncclSuccess;
  if (t->shrink) {
    for (int r = 0; r < n; r++)
      if (!is_excluded(t, r)) members[m++] = r;
  } else {
    res = split_members(t, members, &m);
  }
  if (res == ncclSuccess && t->child) res = join_child(t, members, m);
  if (borrow) dccl_bootstrap_set_abort_flag(parent->bootstrap, &parent->abort_flag);
  free(members);
  return res;
}

static void task_free(struct split_task *t) {
  free(t->excluded);
  free(t);
}

static void *split_main(void *arg) {
  struct split_task *t = arg;
  struct dccl_comm *parent = t->parent;
  dccl_cuda_set_current(t->child ? t->child->cu_ctx : parent->cu_ctx); /* a DCCL thread: the device's context */
  ncclResult_t res = split_run(t);
  if (t->child) dccl_comm_finish_init(t->child, res);
  task_free(t);
  atomic_fetch_sub(&parent->splits_running, 1); /* the parent may be destroyed from here on */
  return NULL;
}

/* Runs the task (taking ownership of it): now, or for a nonblocking config in the background. */
static ncclResult_t split_start(struct split_task *t, const struct dccl_comm_config *cfg, ncclComm_t *newcomm) {
  struct dccl_comm *child = t->child;
  if (child) {
    int device = dccl_cuda_current_ordinal(); /* the caller's current device, else the parent's */
    dccl_comm_set_device(child, device >= 0 ? device : t->parent->cuda_device);
    dccl_config_copy(&child->config, cfg);
    child->nonblocking = cfg->cfg.blocking == 0;
  }
  ncclResult_t res;
  if (cfg->cfg.blocking == 0) {
    if (child) {
      atomic_store(&child->init_state, DCCL_INIT_PENDING);
      if ((res = dccl_registry_add(child)) != ncclSuccess) goto fail;
    }
    atomic_fetch_add(&t->parent->splits_running, 1);
    if ((res = dccl_run_detached(split_main, t)) != ncclSuccess) {
      atomic_fetch_sub(&t->parent->splits_running, 1);
      if (child) dccl_registry_remove(child);
      goto fail;
    }
    *newcomm = child;
    return ncclInProgress;
  }
  res = split_run(t);
  if (res == ncclSuccess && child) res = dccl_registry_add(child);
  if (res != ncclSuccess) goto fail;
  *newcomm = child;
  task_free(t);
  return ncclSuccess;
fail:
  if (child) dccl_comm_free(child, 0);
  task_free(t);
  return res;
}

static ncclResult_t check_parent(struct dccl_comm *comm, ncclComm_t *newcomm, const char *call) {
  DCCLCHECK(dccl_comm_check(comm, call));
  if (!newcomm) return dccl_error(ncclInvalidArgument, "%s: newcomm is NULL", call);
  *newcomm = NULL;
  if (atomic_load(&comm->init_state) != DCCL_INIT_READY)
    return dccl_error(ncclInvalidUsage, "%s: the parent communicator is %s", call,
                      atomic_load(&comm->init_state) == DCCL_INIT_PENDING ? "still being created" : "failed");
  /* The other ranks meet over the parent's bootstrap to drain after a mismatch: join them (as a rank that cannot
   * keep) before the split's own exchanges would cross theirs. */
  if (atomic_load(&comm->drain_pending)) return dccl_op_failed(comm, NULL, ncclInvalidUsage);
  return ncclSuccess;
}

static struct split_task *task_new(struct dccl_comm *parent, int joins) {
  struct split_task *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->parent = parent;
  if (joins && !(t->child = dccl_comm_alloc(-1, 0))) {
    free(t);
    return NULL;
  }
  return t;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
  const char *call = "ncclCommSplit";
  struct dccl_comm_config cfg;
  DCCLCHECK(check_parent(comm, newcomm, call));
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return dccl_error(ncclInvalidArgument, "%s: color %d is negative (and not NCCL_SPLIT_NOCOLOR)", call, color);
  DCCLCHECK(dccl_config_read(config, &comm->config, &cfg, call)); /* NULL: the parent's, as in NCCL */
  struct split_task *t = task_new(comm, color != NCCL_SPLIT_NOCOLOR);
  if (!t) return dccl_error(ncclSystemError, "%s: out of memory", call);
  t->color = color;
  t->key = key;
  return split_start(t, &cfg, newcomm);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
                            ncclConfig_t *config, int shrinkFlags) {
  const char *call = "ncclCommShrink";
  struct dccl_comm_config cfg;
  DCCLCHECK(check_parent(comm, newcomm, call));
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return dccl_error(ncclInvalidArgument, "%s: excludeRanksList is NULL or its count (%d) negative", call,
                      excludeRanksCount);
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return dccl_error(ncclInvalidArgument, "%s: shrinkFlags %d is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT",
                      call, shrinkFlags);
  for (int i = 0; i < excludeRanksCount; i++)
    if (excludeRanksList[i] < 0 || excludeRanksList[i] >= comm->nranks)
      return dccl_error(ncclInvalidArgument, "%s: excluded rank %d is outside 0..%d", call, excludeRanksList[i],
                        comm->nranks - 1);
  DCCLCHECK(dccl_config_read(config, &comm->config, &cfg, call));
  /* First the parent's operations stop (a rank excluded too: it leaves the parent), as ncclCommRevoke does. */
  if (shrinkFlags == NCCL_SHRINK_ABORT) dccl_comm_revoke(comm);
  int excluded = 0;
  for (int i = 0; i < excludeRanksCount; i++) excluded |= excludeRanksList[i] == comm->rank;
  if (excluded) return ncclSuccess; /* not a member: *newcomm stays NULL, and the members do not wait for it */
  struct split_task *t = task_new(comm, 1);
  if (!t || (excludeRanksCount > 0 && !(t->excluded = malloc((size_t)excludeRanksCount * sizeof(int))))) {
    if (t) dccl_comm_free(t->child, 0), task_free(t);
    return dccl_error(ncclSystemError, "%s: out of memory", call);
  }
  if (excludeRanksCount > 0) memcpy(t->excluded, excludeRanksList, (size_t)excludeRanksCount * sizeof(int));
  t->nexcluded = excludeRanksCount;
  t->shrink = 1;
  t->abort_parent = shrinkFlags == NCCL_SHRINK_ABORT;
  return split_start(t, &cfg, newcomm);
}
