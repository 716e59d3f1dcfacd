/* What a communicator's uncaptured kernel launches were called for, so that a stall report can name the device
 * operation that makes no progress: no host thread waits in it (the kernels do), so the bootstrap's monitor thread
 * asks here (core/stall_report.c). A launch is finished once the CTAs reported done reach its ticket; progress is
 * any change in that count. Plain host code: the ring does not touch the GPU. */
#ifndef DCCL_LAUNCH_NOTES_H_
#define DCCL_LAUNCH_NOTES_H_

#include <pthread.h>
#include <stdint.h>

#include "pure/conn_desc.h"

#define DCCL_LAUNCH_NOTES 32 /* launches remembered; an older one still running is forgotten (reports only) */

struct dccl_launch_note {
  uint32_t ticket;   /* finished once done CTAs reach it (32 bits that wrap) */
  int64_t launch_ns; /* dccl_now_ns at the launch */
  struct dccl_slot_header call; /* the launch's first operation: its count, types and root, whatever DCCL_CHECK says */
};

struct dccl_launch_notes {
  pthread_mutex_t lock; /* the launching thread adds, the monitor thread reads */
  struct dccl_launch_note ring[DCCL_LAUNCH_NOTES];
  uint64_t added;        /* notes added so far; ring[(added - 1) % N] is the newest */
  uint32_t last_done;    /* done CTAs when last asked */
  int64_t last_change_ns; /* when that count last moved */
};

void dccl_launch_notes_init(struct dccl_launch_notes *n);
void dccl_launch_notes_destroy(struct dccl_launch_notes *n);
void dccl_launch_notes_add(struct dccl_launch_notes *n, uint32_t ticket, int64_t now_ns,
                           const struct dccl_slot_header *call);
/* The oldest launch not finished with `done` CTAs done: 1 with its call and the time since the later of its launch
 * and the last change in `done` (0 where that is after now_ns); 0 when every remembered launch has finished. */
int dccl_launch_notes_stalled(struct dccl_launch_notes *n, uint32_t done, int64_t now_ns,
                              struct dccl_slot_header *call, int64_t *idle_ns);

#endif
