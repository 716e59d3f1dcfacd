/* A board in shared memory for small allgathers among the ranks of one host (transports/shm/shm_board.h). */
#include "transports/shm/shm_board.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "transports/shm/shm_private.h"
#include "util/clock.h"
#include "util/deadline.h"
#include "util/error.h"
#include "util/wait.h"

#define SLOT_HEAD 64 /* the round's number, alone on its cache line */

struct dccl_shm_board {
  unsigned char *map;
  size_t bytes, slot, max_bytes;
  int rank, nranks;
  uint64_t round;
};

static _Atomic uint64_t *seq_of(const struct dccl_shm_board *b, int rank, int parity) {
  return (_Atomic uint64_t *)(b->map + ((size_t)rank * 2 + (size_t)parity) * b->slot);
}

static unsigned char *record_of(const struct dccl_shm_board *b, int rank, int parity) {
  return (unsigned char *)seq_of(b, rank, parity) + SLOT_HEAD;
}

ncclResult_t dccl_shm_board_open(const char *name, int create, int rank, int nranks, size_t max_bytes,
                                 struct dccl_shm_board **out) {
  *out = NULL;
  struct dccl_shm_board *b = calloc(1, sizeof(*b));
  if (!b) return dccl_error(ncclSystemError, "out of memory");
  b->rank = rank;
  b->nranks = nranks;
  b->max_bytes = max_bytes;
  b->slot = SLOT_HEAD + (max_bytes + 63) / 64 * 64;
  b->bytes = b->slot * 2 * (size_t)nranks;
  void *map = NULL;
  ncclResult_t res = create ? dccl_shm_segment_create(name, b->bytes, &map) : dccl_shm_segment_open(name, b->bytes, &map);
  if (res != ncclSuccess) {
    free(b);
    return res;
  }
  b->map = map;
  *out = b;
  return ncclSuccess;
}

ncclResult_t dccl_shm_board_allgather(struct dccl_shm_board *b, void *data, size_t size,
                                      const struct dccl_shm_board_wait *wait) {
  if (size > b->max_bytes)
    return dccl_error(ncclInternalError, "a record of %zu bytes on a board of %zu", size, b->max_bytes);
  uint64_t round = ++b->round;
  int parity = (int)(round & 1);
  unsigned char *all = data;
  memcpy(record_of(b, b->rank, parity), all + (size_t)b->rank * size, size);
  atomic_store_explicit(seq_of(b, b->rank, parity), round, memory_order_release);
  struct dccl_waiter w;
  dccl_waiter_init(&w, wait->oversubscribed);
  for (int r = 0; r < b->nranks; r++) {
    if (r == b->rank) continue;
    while (atomic_load_explicit(seq_of(b, r, parity), memory_order_acquire) != round) {
      if (!dccl_waiter_idle(&w)) continue;
      if (wait->on_idle) wait->on_idle(wait->arg, r, (uint64_t)(dccl_now_ns() - (int64_t)w.idle_since_ns));
      int state = dccl_wait_state(wait->abort_flag, wait->deadline_ns);
      if (state != DCCL_WAIT_OK)
        return dccl_error(ncclRemoteError, "the ranks' meeting in shared memory (round %llu): %s while waiting for "
                          "rank %d", (unsigned long long)round,
                          state == DCCL_WAIT_ABORTED ? "aborted" : "timed out (DCCL_TIMEOUT)", r);
    }
    memcpy(all + (size_t)r * size, record_of(b, r, parity), size);
  }
  return ncclSuccess;
}

void dccl_shm_board_close(struct dccl_shm_board *b) {
  if (!b) return;
  munmap(b->map, b->bytes);
  free(b);
}
