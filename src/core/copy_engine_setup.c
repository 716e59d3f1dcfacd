/* The copy-engine collectives' creation step (core/copy_engine_setup.h). */
#include "core/copy_engine_setup.h"

#include <stdlib.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "collectives/device/dev_exec.h"
#include "core/comm_init.h"
#include "util/error.h"
#include "util/log.h"
#include "util/params.h"

/* The piece this rank asks for: DCCL_CE_CHUNK, lowered so that the region (4 x ranks pieces, 6 with send/recv)
 * fits in what DCCL_DEV_MEM_LIMIT leaves after the device links (one 4 KiB page a piece at least). */
static size_t fit_chunk(struct dccl_comm *comm, int p2p) {
  size_t asked = dccl_dev_ce_chunk(), dev = 0, pinned = 0;
  dccl_comm_memory(comm, &dev, &pinned);
  uint64_t limit = (uint64_t)dccl_param_int(DCCL_PARAM_DEV_MEM_LIMIT);
  uint64_t most = (limit > dev ? limit - dev : 0) / ((p2p ? 6 : 4) * (uint64_t)comm->nranks) / 4096 * 4096;
  if (most < 4096) most = 4096;
  return asked < most ? asked : (size_t)most;
}

ncclResult_t dccl_copy_engine_setup(struct dccl_comm *comm, int take_turns) {
  int64_t asked = dccl_param_int(DCCL_PARAM_CE);
  if (asked == 0 || !dccl_dev_ce_possible(&comm->coll)) return ncclSuccess;
  int n = comm->nranks;
  /* Each rank's wish, then its region: a rank that could not allocate or export one says so, and none uses it. */
  struct side {
    int32_t want, ok, pid, p2p; /* p2p: DCCL_CE_P2P here (send/recv take the copy engines where every rank asks) */
    uint64_t chunk; /* the piece asked for here (fit_chunk): all take the smallest, so their regions agree */
    struct dccl_peer_mem_export region;
  } *all = calloc((size_t)n, sizeof(*all));
  struct dccl_peer_mem_export *exports = calloc((size_t)n, sizeof(*exports));
  int32_t *pids = calloc((size_t)n, sizeof(*pids));
  ncclResult_t res = all && exports && pids ? ncclSuccess : dccl_error(ncclSystemError, "out of memory");
  if (res == ncclSuccess) {
    all[comm->rank].want = asked == 1 || take_turns;
    all[comm->rank].p2p = dccl_param_int(DCCL_PARAM_CE_P2P) != 0;
    all[comm->rank].chunk = fit_chunk(comm, all[comm->rank].p2p);
    res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  }
  int want = 0, p2p = 1;
  size_t chunk = res == ncclSuccess ? all[0].chunk : 0;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    want |= all[r].want;
    p2p &= all[r].p2p;
    if (all[r].chunk < chunk) chunk = all[r].chunk;
  }
  if (res == ncclSuccess && want) {
    struct side *me = &all[comm->rank];
    me->pid = (int32_t)getpid();
    me->ok = dccl_dev_ce_export(&comm->coll, chunk, p2p, &me->region) == ncclSuccess;
    if (!me->ok) DCCL_WARN(DCCL_INIT, "rank %d: no copy-engine collectives: %s", comm->rank, dccl_last_error());
    res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
    int ok = 1;
    for (int r = 0; r < n && res == ncclSuccess; r++) {
      ok &= all[r].ok;
      exports[r] = all[r].region;
      pids[r] = all[r].pid;
    }
    if (res == ncclSuccess && ok) res = dccl_dev_ce_connect(&comm->coll, chunk, p2p, exports, pids);
  }
  free(all);
  free(exports);
  free(pids);
  return res;
}
