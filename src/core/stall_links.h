/* What a stalled communicator's device links show from the host (core/stall_links.c). */
#ifndef DCCL_STALL_LINKS_H_
#define DCCL_STALL_LINKS_H_

#include <stddef.h>

#include "core/comm.h"
#include "pure/conn_desc.h"

/* One line on a link whose FIFO (laid out by `d`, every part in one region) a host can read at `region`: its
 * counters and, on a receiving side with a slot in flight, what the slot at `head` holds (a bulk slot, or how many
 * of an LL slot's lines carry this lap's flag). `lane` is the device lane (from 0). Returns 1 when something is in
 * flight (tail > head), 0 when the link is idle. */
int dccl_link_state_text(const struct dccl_conn_desc *d, const char *region, int is_send, int peer, int lane,
                         char *out, size_t len);
/* Logs (WARN) that line for each of the communicator's device links whose FIFO a host can read (the staged
 * transport's) and that has a slot in flight, then how many have one and how many are idle: kernels keep their
 * positions in GPU memory, so this is what the host can say about where they wait. */
void dccl_stall_log_links(struct dccl_comm *comm);

#endif
