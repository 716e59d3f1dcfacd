/* What a stall report says about a device link whose FIFO a host can read (src/core/stall_links.c), on a FIFO laid
 * out and filled here: an idle link; a receiving side whose next slot is an LL slot with a line missing, whole, or
 * a bulk slot, or whose LL header line is not there; a sending side whose FIFO is full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stall_links.h"
#include "transports/transport.h"
#include "unit_check.h"

#define NSLOTS 4
#define SLOT_BYTES 65536

static struct dccl_conn_desc d;
static char *region, *regions[DCCL_REGIONS];

static void counters(uint64_t head, uint64_t tail) {
  *dccl_conn_word(regions, d.head) = head;
  *dccl_conn_word(regions, d.tail) = tail;
}

/* An LL slot of `bytes` at `pos`, as a producer writes it. */
static void write_ll(uint64_t pos, uint64_t bytes) {
  struct dccl_slot_header h = {.bytes = bytes, .seq = 9, .kind = 1};
  uint32_t payload[64] = {0};
  dccl_ll_write_slot(dccl_conn_ll_slot(&d, regions, pos), pos, &h, payload);
}

int main(void) {
  uint64_t bytes = dccl_conn_desc_layout(&d, NSLOTS, SLOT_BYTES, 4096, DCCL_REGION_RECV);
  region = aligned_alloc(128, (bytes + 127) / 128 * 128);
  regions[0] = regions[1] = region;
  dccl_fifo_init(region, &d);
  char line[320];

  check(!dccl_link_state_text(&d, region, 0, 1, 3, line, sizeof(line)) && strstr(line, "link from rank 1 (channel 3)"),
        "an idle link: \"%s\"", line);

  counters(2, 3); /* slot 2 in flight: 100 bytes of LL, 18 lines (5 of header), line 10 not written */
  write_ll(2, 100);
  uint64_t *units = (uint64_t *)dccl_conn_ll_slot(&d, regions, 2);
  units[20] = 0;
  int busy = dccl_link_state_text(&d, region, 0, 1, 3, line, sizeof(line));
  check(busy && strstr(line, "rank 1 has sent 3 slots, this rank taken 2") &&
            strstr(line, "slot 2: LL, 17 of 18 lines there (100 bytes), line 10 the first missing"),
        "an LL slot with a line missing: \"%s\"", line);
  write_ll(2, 100);
  dccl_link_state_text(&d, region, 0, 1, 3, line, sizeof(line));
  check(strstr(line, "slot 2: LL, all 18 lines there") != NULL, "a whole LL slot: \"%s\"", line);
  units[0] = 0;
  dccl_link_state_text(&d, region, 0, 1, 3, line, sizeof(line));
  check(strstr(line, "slot 2: its LL header line not there") != NULL, "no header line: \"%s\"", line);
  struct dccl_slot_header h = {.bytes = 100};
  dccl_bulk_write_head(dccl_conn_slot(&d, regions, 2), 2, &h);
  dccl_link_state_text(&d, region, 0, 1, 3, line, sizeof(line));
  check(strstr(line, "slot 2: a bulk slot, there") != NULL, "a bulk slot: \"%s\"", line);

  counters(2, 2 + NSLOTS);
  busy = dccl_link_state_text(&d, region, 1, 0, DCCL_LANE_P2P + 1, line, sizeof(line));
  check(busy && strstr(line, "link to rank 0 (send/recv lane 1): this rank has sent 6 slots, rank 0 taken 2") &&
            strstr(line, "the FIFO is full"),
        "a full FIFO: \"%s\"", line);
  free(region);
  printf("test_stall_links: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
