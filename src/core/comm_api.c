/* The communicator part of the API: create, split, finalize, destroy, abort, query. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "collectives/device/dev_exec.h"
#include "core/comm.h"
#include "core/comm_async.h"
#include "core/comm_init.h"
#include "core/comm_registry.h"
#include "core/group.h"
#include "util/clock.h"
#include "util/cuda_driver.h"
#include "util/cuda_mem.h"
#include "util/error.h"

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (!uniqueId) return dccl_error(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  return dccl_bootstrap_create_id(uniqueId);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config) {
  if (!comm) return dccl_error(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *comm = NULL;
  if (nranks < 1) return dccl_error(ncclInvalidArgument, "ncclCommInitRank: nranks %d < 1", nranks);
  if (rank < 0 || rank >= nranks)
    return dccl_error(ncclInvalidArgument, "ncclCommInitRank: rank %d is outside 0..%d", rank, nranks - 1);
  /* The device and config are the caller's now: a deferred creation runs later, on another thread. */
  struct dccl_init_req req = {
      .comm = comm, .nranks = nranks, .rank = rank, .device = dccl_cuda_current_ordinal(), .id = commId};
  DCCLCHECK(dccl_config_read(config, NULL, &req.config, "ncclCommInitRankConfig"));
  DCCLCHECK(dccl_bootstrap_check_id(&commId));
  if (dccl_group_depth() > 0) return dccl_group_defer_init(&req);
  if (req.config.cfg.blocking == 0) return dccl_comm_init_async(&req); /* ncclInProgress */
  return dccl_comm_init_rank(&req);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds,
                                      ncclConfig_t *config) {
  if (nId < 1) return dccl_error(ncclInvalidArgument, "ncclCommInitRankScalable: need at least one id (nId %d)", nId);
  if (!commIds) return dccl_error(ncclInvalidArgument, "ncclCommInitRankScalable: commIds is NULL");
  /* Every rank can reach the first id's rendezvous; the others are not needed for rank discovery. */
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

struct init_all_arg {
  struct dccl_init_req req;
  ncclResult_t res;
};

static void *init_all_thread(void *p) {
  struct init_all_arg *a = p;
  void *ctx = NULL; /* a DCCL thread: the device's primary context is current while it creates */
  if (a->req.device >= 0 && dccl_cuda_primary_ctx_retain(a->req.device, &ctx) == ncclSuccess) dccl_cuda_set_current(ctx);
  a->res = dccl_comm_init_rank(&a->req);
  if (ctx) dccl_cuda_primary_ctx_release(a->req.device);
  return NULL;
}

/* Creates `n` communicators of one job at once, one thread each (creation blocks until all ranks join). */
ncclResult_t dccl_init_many(const struct dccl_init_req *reqs, int n) {
  struct init_all_arg *args = calloc((size_t)n, sizeof(*args));
  pthread_t *threads = calloc((size_t)n, sizeof(*threads));
  ncclResult_t res = ncclSuccess;
  if (!args || !threads) {
    free(args);
    free(threads);
    return dccl_error(ncclSystemError, "out of memory");
  }
  int started = 0;
  for (int i = 0; i < n; i++) {
    args[i] = (struct init_all_arg){reqs[i], ncclSuccess};
    if (pthread_create(&threads[i], NULL, init_all_thread, &args[i]) != 0) {
      res = dccl_error(ncclSystemError, "cannot start a thread to create communicator %d", i);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i], NULL);
    if (args[i].res != ncclSuccess && res == ncclSuccess) res = args[i].res;
  }
  free(args);
  free(threads);
  return res;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  if (!comm) return dccl_error(ncclInvalidArgument, "ncclCommInitAll: comm is NULL");
  if (ndev < 1) return dccl_error(ncclInvalidArgument, "ncclCommInitAll: ndev %d < 1", ndev);
  ncclUniqueId id;
  DCCLCHECK(ncclGetUniqueId(&id));
  struct dccl_init_req *reqs = calloc((size_t)ndev, sizeof(*reqs));
  if (!reqs) return dccl_error(ncclSystemError, "out of memory");
  /* Rank i is for devlist[i] (NULL: device i), as in NCCL. */
  for (int i = 0; i < ndev; i++) {
    comm[i] = NULL;
    reqs[i] = (struct dccl_init_req){
        .comm = &comm[i], .nranks = ndev, .rank = i, .device = devlist ? devlist[i] : i, .id = id};
    dccl_config_read(NULL, NULL, &reqs[i].config, "ncclCommInitAll"); /* defaults: cannot fail */
  }
  ncclResult_t res = dccl_init_many(reqs, ndev);
  free(reqs);
  return res;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommFinalize"));
  if (atomic_load(&comm->revoked))
    return dccl_error(ncclInvalidUsage, "ncclCommFinalize: the communicator was revoked: ncclCommDestroy frees it");
  comm->finalized = 1;
  dccl_dev_comm_wait(&comm->coll); /* the kernels queued so far finish (an aborted one soon) */
  /* A blocking communicator's operations completed in their calls; a nonblocking one's are done when
   * ncclCommGetAsyncError stops reporting ncclInProgress. */
  if (comm->nonblocking && atomic_load(&comm->coll.queue.pending) > 0) return ncclInProgress;
  return ncclSuccess;
}

/* Waits for what runs in the background (a nonblocking creation or split, posted operations), then frees. */
static void comm_release(struct dccl_comm *comm) {
  dccl_comm_wait_background(comm);
  dccl_progress_thread_stop(comm);
  dccl_registry_remove(comm);
  /* Even a failed communicator leaves on purpose: the monitor must not report this rank as the one that died. */
  dccl_comm_free(comm, 1);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess; /* as NCCL: destroying NULL is a no-op */
  DCCLCHECK(dccl_comm_check(comm, "ncclCommDestroy"));
  comm_release(comm);
  return ncclSuccess;
}

/* ncclCommAbort's purpose is a watchdog thread ending a call that hangs in another: that call, stopped by the
 * abort flag, returns within milliseconds, and the communicator is freed only once it has (a call holds ops out of
 * the pool until it returns). One still inside after 10 s keeps it: it is leaked, never freed under that thread. */
#define DCCL_ABORT_CALLS_WAIT_NS (10 * 1000000000ll)
static int calls_left(struct dccl_comm *comm) {
  int64_t give_up = dccl_now_ns() + DCCL_ABORT_CALLS_WAIT_NS;
  while (atomic_load(&comm->coll.ops_out) > 0 && dccl_now_ns() < give_up) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&comm->coll.ops_out) == 0;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  DCCLCHECK(dccl_comm_check(comm, "ncclCommAbort"));
  /* The abort flag stops every wait: a pending creation's bootstrap, the posted operations. */
  dccl_comm_set_failed(comm, ncclRemoteError, "the communicator was aborted (ncclCommAbort)");
  dccl_group_drop_comm(&comm->coll); /* this thread's ungrouped-yet calls on it would outlive it */
  if (!calls_left(comm)) {
    DCCL_WARN(DCCL_INIT, "ncclCommAbort: a call on rank %d's communicator still runs in another thread 10 s after "
                         "the abort: the communicator is left allocated rather than freed under it",
              comm->rank);
    dccl_registry_remove(comm);
    return ncclSuccess;
  }
  comm_release(comm);
  return ncclSuccess;
}

/* Stops every operation in flight (waits, kernels; the peers' ends of the links learn it at once) and refuses new
 * ones; ncclCommGetAsyncError reports ncclInProgress until they have all ended, then ncclSuccess, whatever they
 * failed with. Destroy, split and shrink then work (the split's exchanges use the bootstrap, which the stopped
 * operations never held). Calling it again does nothing more. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return dccl_error(ncclInvalidArgument, "ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT (0), not %d",
                      revokeFlags);
  if (atomic_load(&comm->init_state) != DCCL_INIT_READY)
    return dccl_error(ncclInvalidUsage, "ncclCommRevoke: the communicator is %s (ncclCommAbort ends it)",
                      atomic_load(&comm->init_state) == DCCL_INIT_PENDING ? "still being created"
                                                                           : "a failed creation");
  dccl_comm_revoke(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!asyncError) return dccl_error(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  DCCLCHECK(dccl_comm_check(comm, "ncclCommGetAsyncError"));
  /* Work in the background: a nonblocking creation, a split of this parent, posted operations. */
  int busy = atomic_load(&comm->init_state) == DCCL_INIT_PENDING || atomic_load(&comm->splits_running) > 0 ||
             (comm->nonblocking && atomic_load(&comm->coll.queue.pending) > 0);
  if (atomic_load(&comm->revoked)) { /* in progress until the stopped operations (kernels too) have ended */
    *asyncError = busy || !dccl_comm_quiescent(comm) ? ncclInProgress : ncclSuccess;
    return ncclSuccess;
  }
  /* A kernel's failure becomes the communicator's (the first failure wins). The device side is read only once
   * creation has published it: a nonblocking creation is still building it on its own thread. */
  char text[512];
  int ready = atomic_load(&comm->init_state) == DCCL_INIT_READY;
  ncclResult_t dev_err = ready && atomic_load(&comm->async_error) == ncclSuccess
                             ? dccl_dev_comm_error(&comm->coll, text, sizeof(text))
                             : ncclSuccess;
  if (dev_err != ncclSuccess) dccl_comm_set_failed(comm, dev_err, text);
  ncclResult_t err = (ncclResult_t)atomic_load(&comm->async_error);
  *asyncError = err != ncclSuccess ? err : busy ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}

/* Rank and size of a split are known only once its creation has run. */
static ncclResult_t check_ready(const ncclComm_t comm, const char *call) {
  DCCLCHECK(dccl_comm_check(comm, call));
  if (atomic_load(&comm->init_state) == DCCL_INIT_PENDING)
    return dccl_error(ncclInProgress, "%s: the communicator is still being created (nonblocking)", call);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  DCCLCHECK(check_ready(comm, "ncclCommCount"));
  if (!count) return dccl_error(ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  DCCLCHECK(check_ready(comm, "ncclCommUserRank"));
  if (!rank) return dccl_error(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommCuDevice"));
  if (!device) return dccl_error(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->cuda_device; /* the device it was created for; -1 for none */
  return ncclSuccess;
}

ncclResult_t dcclCommMemoryUsage(ncclComm_t comm, size_t *device_bytes, size_t *pinned_host_bytes) {
  DCCLCHECK(dccl_comm_check(comm, "dcclCommMemoryUsage"));
  if (!device_bytes || !pinned_host_bytes)
    return dccl_error(ncclInvalidArgument, "dcclCommMemoryUsage: device_bytes or pinned_host_bytes is NULL");
  dccl_comm_memory(comm, device_bytes, pinned_host_bytes);
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  if (!ptr) return dccl_error(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = NULL;
  return dccl_cuda_mem_alloc(ptr, size);
}

ncclResult_t ncclMemFree(void *ptr) {
  if (!ptr) return ncclSuccess;
  return dccl_cuda_mem_free(ptr);
}
