/* A board in a shared-memory segment through which the ranks of one host allgather small records: each rank
 * writes its record into its slot and publishes the round's number; the others read it once they see the number.
 * A meeting of a few microseconds where the bootstrap's sockets take tens. Two slots per rank, by the round's
 * parity: a rank writes round k + 2 only after every rank published round k + 1, so after all have read round k. */
#ifndef DCCL_SHM_BOARD_H_
#define DCCL_SHM_BOARD_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dccl.h"

struct dccl_shm_board;

/* Creates (`create` 1: the segment `name`, zeroed) or opens (0) a board of `nranks` slots of at most `max_bytes`
 * for rank `rank`. */
ncclResult_t dccl_shm_board_open(const char *name, int create, int rank, int nranks, size_t max_bytes,
                                 struct dccl_shm_board **out);

/* How a wait ends or is told about: `abort_flag` set or `deadline_ns` (0: none) passed end it; `on_idle` (may be
 * NULL) hears every few milliseconds of waiting which rank is awaited and for how long. `oversubscribed`: more
 * ranks than cores on this host, so the wait yields at once instead of spinning. */
struct dccl_shm_board_wait {
  _Atomic int *abort_flag;
  int64_t deadline_ns;
  int oversubscribed;
  void (*on_idle)(void *arg, int peer, uint64_t idle_ns);
  void *arg;
};

/* Every rank calls it with the same `size`; `data` holds nranks records of `size`, this rank's filled. Waits for
 * every rank's record of this round; ends with ncclRemoteError, naming the rank waited for, as `wait` says. */
ncclResult_t dccl_shm_board_allgather(struct dccl_shm_board *b, void *data, size_t size,
                                      const struct dccl_shm_board_wait *wait);

/* Unmaps the board (NULL: nothing); the name is the creator's to unlink (dccl_shm_segment_unlink). */
void dccl_shm_board_close(struct dccl_shm_board *b);

#endif
