/* What a stalled communicator's device links show from the host (core/stall_links.h): the counters and the next
 * slot of each link whose FIFO lies in host memory, logged on the rank whose kernels make no progress, since no
 * host thread waits in them to say where. */
#include "core/stall_links.h"

#include <stdio.h>

#include "collectives/coll_comm.h"
#include "core/comm.h"
#include "transports/transport.h"
#include "util/log.h"

#define LANE_NAME_LEN 32

static void lane_name(int lane, char *out, size_t len) {
  if (lane >= DCCL_LANE_P2P)
    snprintf(out, len, "send/recv lane %d", lane - DCCL_LANE_P2P);
  else
    snprintf(out, len, "channel %d", lane);
}

/* The slot at `pos` of a receiving side: a bulk slot, or how many of the LL slot's lines (as many as its header
 * line's bytes say) carry this lap's flag, and the first that does not. */
static void slot_text(const struct dccl_conn_desc *d, char *const *regions, uint64_t pos, char *out, size_t len) {
  uint32_t flag = dccl_ll_flag(pos), d0, d1;
  const char *bulk = dccl_conn_slot(d, regions, pos);
  if (dccl_ld_acquire_u64((const uint64_t *)bulk) == dccl_ll_unit(DCCL_SLOT_BULK_MARK, flag)) {
    snprintf(out, len, "; slot %llu: a bulk slot, there", (unsigned long long)pos);
    return;
  }
  if (!d->ll_bytes) {
    snprintf(out, len, "; slot %llu: not there", (unsigned long long)pos);
    return;
  }
  const uint64_t *units = (const uint64_t *)dccl_conn_ll_slot(d, regions, pos);
  if (!dccl_ll_load_line(units, flag, &d0, &d1)) {
    snprintf(out, len, "; slot %llu: its LL header line not there", (unsigned long long)pos);
    return;
  }
  uint64_t bytes = (uint64_t)d1 << 32 | d0;
  uint32_t lines = dccl_ll_units(bytes > d->ll_bytes ? d->ll_bytes : bytes) / 2, there = 0, first_missing = 0;
  for (uint32_t l = 0; l < lines; l++) {
    if (dccl_ll_load_line(units + 2 * l, flag, &d0, &d1))
      there++;
    else if (!first_missing)
      first_missing = l;
  }
  if (there == lines)
    snprintf(out, len, "; slot %llu: LL, all %u lines there (%llu bytes)", (unsigned long long)pos, lines,
             (unsigned long long)bytes);
  else
    snprintf(out, len, "; slot %llu: LL, %u of %u lines there (%llu bytes), line %u the first missing",
             (unsigned long long)pos, there, lines, (unsigned long long)bytes, first_missing);
}

int dccl_link_state_text(const struct dccl_conn_desc *d, const char *region, int is_send, int peer, int lane,
                         char *out, size_t len) {
  char *regions[DCCL_REGIONS] = {(char *)region, (char *)region};
  uint64_t head = dccl_ld_acquire_u64(dccl_conn_word(regions, d->head));
  uint64_t tail = dccl_ld_acquire_u64(dccl_conn_word(regions, d->tail));
  char where[LANE_NAME_LEN];
  lane_name(lane, where, sizeof(where));
  int n;
  if (is_send)
    n = snprintf(out, len, "link to rank %d (%s): this rank has sent %llu slots, rank %d taken %llu%s", peer, where,
                 (unsigned long long)tail, peer, (unsigned long long)head,
                 tail - head >= d->nslots ? " (the FIFO is full)" : "");
  else
    n = snprintf(out, len, "link from rank %d (%s): rank %d has sent %llu slots, this rank taken %llu", peer, where,
                 peer, (unsigned long long)tail, (unsigned long long)head);
  if (!is_send && tail > head && n > 0 && (size_t)n < len) slot_text(d, regions, head, out + n, len - (size_t)n);
  return tail != head;
}

void dccl_stall_log_links(struct dccl_comm *comm) {
  int busy = 0, idle = 0;
  for (struct dccl_conn_entry *e = atomic_load_explicit(&comm->conns, memory_order_acquire); e; e = e->next) {
    const struct dccl_conn *c = &e->conn;
    const char *view = c->device && c->transport ? c->transport->host_view(c) : NULL;
    if (!view || !c->desc.nslots) continue; /* not a FIFO a host reads, or one still being connected */
    char line[320];
    if (dccl_link_state_text(&c->desc, view, c->is_send, c->peer, e->lane - DCCL_LANE_DEVICE, line, sizeof(line))) {
      DCCL_WARN(DCCL_COLL, "rank %d: %s %s", comm->rank, c->transport->name, line);
      busy++;
    } else {
      idle++;
    }
  }
  if (busy + idle)
    DCCL_WARN(DCCL_COLL, "rank %d: its kernels' links in host memory: %d with slots in flight%s, %d idle", comm->rank,
              busy, busy ? " (above)" : "", idle);
}
