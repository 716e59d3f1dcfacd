/* A communicator's shared-memory board (core/comm_board.h). */
#include "core/comm_board.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "transports/shm/shm_private.h"
#include "util/deadline.h"
#include "util/error.h"
#include "util/log.h"
#include "util/params.h"

/* What each rank says while the board is made: rank 0 its name, every rank whether it has it mapped. */
struct board_say {
  int32_t ok;
  char name[DCCL_SHM_NAME_LEN];
};

ncclResult_t dccl_comm_board_open(struct dccl_comm *comm, size_t max_bytes, struct dccl_shm_board **out) {
  *out = NULL;
  for (int r = 0; r < comm->nranks; r++)
    if (comm->peers[r].real_host_hash != comm->peers[0].real_host_hash) return ncclSuccess; /* alike everywhere */
  struct board_say *all = calloc((size_t)comm->nranks, sizeof(*all));
  if (!all) return dccl_error(ncclSystemError, "out of memory");
  struct board_say *me = &all[comm->rank];
  struct dccl_shm_board *b = NULL;
  if (comm->rank == 0) {
    snprintf(me->name, sizeof(me->name), "/%s%d-%llx-board", DCCL_SHM_PREFIX, (int)getpid(),
             (unsigned long long)comm->peers[0].comm_nonce);
    me->ok = dccl_shm_board_open(me->name, 1, 0, comm->nranks, max_bytes, &b) == ncclSuccess;
  }
  ncclResult_t res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  if (res == ncclSuccess && comm->rank != 0)
    me->ok = all[0].ok && dccl_shm_board_open(all[0].name, 0, comm->rank, comm->nranks, max_bytes, &b) == ncclSuccess;
  if (res == ncclSuccess) res = dccl_bootstrap_allgather(comm->bootstrap, all, sizeof(*all));
  if (comm->rank == 0 && all[0].ok) dccl_shm_segment_unlink(all[0].name); /* every rank that could has it mapped */
  int missing = -1;
  for (int r = 0; res == ncclSuccess && missing < 0 && r < comm->nranks; r++)
    if (!all[r].ok) missing = r;
  free(all);
  if (res != ncclSuccess || missing >= 0) {
    dccl_shm_board_close(b);
    if (res == ncclSuccess)
      DCCL_INFO(DCCL_INIT, "rank %d: no shared-memory board (rank %d could not %s it): meetings take the bootstrap",
                comm->rank, missing, missing == 0 ? "make" : "map");
    return res;
  }
  *out = b;
  return ncclSuccess;
}

struct waiting {
  struct dccl_comm *comm;
  const struct dccl_slot_header *call;
};

static void on_idle(void *arg, int peer, uint64_t idle_ns) {
  struct waiting *w = arg;
  dccl_stall_note_meeting(w->comm, w->call, peer, idle_ns);
}

ncclResult_t dccl_comm_board_allgather(struct dccl_comm *comm, struct dccl_shm_board *b, void *data, size_t size,
                                       const struct dccl_slot_header *call) {
  struct waiting w = {comm, call};
  struct dccl_shm_board_wait wait = {&comm->abort_flag, dccl_deadline_after_s(dccl_param_int(DCCL_PARAM_TIMEOUT)),
                                     comm->oversubscribed, on_idle, &w};
  return dccl_comm_failure_over(comm, dccl_shm_board_allgather(b, data, size, &wait));
}
