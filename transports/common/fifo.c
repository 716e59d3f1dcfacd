/* The FIFO every transport shares (pure/conn_desc.h): a fresh region, and a conn's binding to one. */
#include <stdlib.h>
#include <string.h>

#include "transports/transport.h"
#include "util/error.h"

void dccl_fifo_init(void *region, const struct dccl_conn_desc *d) {
  /* The padding is zeroed too, so a FIFO in fresh shared memory and one in malloc'd memory look the same. */
  struct dccl_fifo_ctrl *ctrl = region;
  memset(ctrl, 0, sizeof(*ctrl));
  ctrl->nslots = d->nslots;
  ctrl->slot_bytes = d->slot_bytes;
  /* Reused memory may hold units whose flags look fresh (an earlier FIFO's slot at the same position): clear
   * every unit a consumer may poll before the first lap writes it. */
  char *regions[DCCL_REGIONS] = {region, region};
  for (uint64_t i = 0; i < d->nslots; i++) {
    memset(dccl_conn_slot(d, regions, i), 0, 8);
    if (d->ll_bytes) memset(dccl_conn_ll_slot(d, regions, i), 0, d->ll_stride);
  }
}

ncclResult_t dccl_conn_bind(struct dccl_conn *c, const struct dccl_conn_desc *d, void *recv_region, void *send_region) {
  c->ll_stage = NULL;
  if (d->protos & DCCL_PROTO_BIT(DCCL_PROTO_LL) && !(c->ll_stage = malloc(DCCL_LL_MAX_BYTES)))
    return dccl_error(ncclSystemError, "out of memory for a connection's LL staging");
  c->desc = *d;
  c->regions[DCCL_REGION_RECV] = recv_region;
  c->regions[DCCL_REGION_SEND] = send_region;
  /* Continue where the FIFO stands (a fresh one stands at 0), so a conn can be bound to a FIFO in use. */
  c->own_counter = dccl_ld_acquire_u64(c->is_send ? dccl_conn_tail(c) : dccl_conn_head(c));
  c->cached_peer_counter = 0; /* re-read at first use */
  return ncclSuccess;
}

void dccl_conn_unbind(struct dccl_conn *c) {
  free(c->ll_stage);
  c->ll_stage = NULL;
  memset(&c->desc, 0, sizeof(c->desc));
  c->regions[DCCL_REGION_RECV] = c->regions[DCCL_REGION_SEND] = NULL;
}
