/* A ring of a communicator's recent kernel launches (collectives/device/launch_notes.h). */
#include "collectives/device/launch_notes.h"

#include <string.h>

void dccl_launch_notes_init(struct dccl_launch_notes *n) {
  memset(n, 0, sizeof(*n));
  pthread_mutex_init(&n->lock, NULL);
}

void dccl_launch_notes_destroy(struct dccl_launch_notes *n) { pthread_mutex_destroy(&n->lock); }

void dccl_launch_notes_add(struct dccl_launch_notes *n, uint32_t ticket, int64_t now_ns,
                           const struct dccl_slot_header *call) {
  pthread_mutex_lock(&n->lock);
  n->ring[n->added % DCCL_LAUNCH_NOTES] = (struct dccl_launch_note){.ticket = ticket, .launch_ns = now_ns,
                                                                      .call = *call};
  n->added++;
  pthread_mutex_unlock(&n->lock);
}

int dccl_launch_notes_stalled(struct dccl_launch_notes *n, uint32_t done, int64_t now_ns,
                              struct dccl_slot_header *call, int64_t *idle_ns) {
  pthread_mutex_lock(&n->lock);
  if (done != n->last_done || n->last_change_ns == 0) {
    n->last_done = done;
    n->last_change_ns = now_ns;
  }
  uint64_t first = n->added > DCCL_LAUNCH_NOTES ? n->added - DCCL_LAUNCH_NOTES : 0;
  int found = 0;
  for (uint64_t i = first; i < n->added && !found; i++) {
    const struct dccl_launch_note *note = &n->ring[i % DCCL_LAUNCH_NOTES];
    if ((int32_t)(done - note->ticket) >= 0) continue; /* finished */
    found = 1;
    *call = note->call;
    int64_t since = note->launch_ns > n->last_change_ns ? note->launch_ns : n->last_change_ns;
    /* A launch noted after the caller read its clock is newer than now: not idle (a negative time read as
     * unsigned fired false reports). */
    *idle_ns = now_ns > since ? now_ns - since : 0;
  }
  pthread_mutex_unlock(&n->lock);
  return found;
}
