/* The FIFO every transport shares: counters at the start of the region, slots after (transport.h). */
#include <string.h>

#include "transports/transport.h"

void dccl_fifo_init(struct dccl_fifo *f, uint32_t nslots, uint64_t slot_bytes) {
  /* The padding is zeroed too, so a FIFO in fresh shared memory and one in malloc'd memory look the same. */
  memset(f, 0, sizeof(*f));
  atomic_init(&f->head, 0);
  atomic_init(&f->tail, 0);
  atomic_init(&f->aborted, 0);
  f->nslots = nslots;
  f->slot_bytes = slot_bytes;
}
