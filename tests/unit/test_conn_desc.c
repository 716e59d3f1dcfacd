/* The connection descriptor (pure/conn_desc.h) and the executor's view over it (transports/transport.h), both
 * ends in one process over one region: the layout, LL flags that never take a stale or torn unit for a fresh one,
 * ends that disagree on the protocol, and the abort word. */
#include <stdlib.h>
#include <string.h>

#include "transports/transport.h"
#include "unit_check.h"

#define NSLOTS 4
#define SLOT_BYTES 8192

static void test_layout(void) {
  struct dccl_conn_desc d;
  uint64_t bytes = dccl_conn_desc_layout(&d, NSLOTS, SLOT_BYTES, DCCL_LL_MAX_BYTES, DCCL_REGION_RECV);
  check(d.head.off % DCCL_CACHELINE == 0 && d.tail.off % DCCL_CACHELINE == 0 && d.aborted.off % DCCL_CACHELINE == 0 &&
            d.head.off != d.tail.off && d.tail.off != d.aborted.off,
        "each shared word alone on its line: head %llu tail %llu aborted %llu", (unsigned long long)d.head.off,
        (unsigned long long)d.tail.off, (unsigned long long)d.aborted.off);
  check(d.slots.off % 64 == 0 && d.slot_stride % 64 == 0 && d.slot_stride >= DCCL_SLOT_HEAD_BYTES + SLOT_BYTES,
        "slots 64-byte aligned and large enough (stride %llu)", (unsigned long long)d.slot_stride);
  check(d.ll_bytes == DCCL_LL_MAX_BYTES && (d.protos & DCCL_PROTO_BIT(DCCL_PROTO_LL)), "LL of %u bytes", d.ll_bytes);
  check(d.ll_slots.off >= d.slots.off + NSLOTS * d.slot_stride && d.ll_slots.region == d.slots.region,
        "LL slots apart from the bulk ones, after them (at %llu)", (unsigned long long)d.ll_slots.off);
  check(d.ll_stride % DCCL_CACHELINE == 0 && dccl_ll_units(d.ll_bytes) * 8 <= d.ll_stride,
        "an LL slot fits its stride (%llu), on whole lines", (unsigned long long)d.ll_stride);
  check(bytes == d.ll_slots.off + NSLOTS * d.ll_stride, "region size %llu", (unsigned long long)bytes);
  dccl_conn_desc_layout(&d, NSLOTS, 40, 1000, DCCL_REGION_SEND);
  check(d.head.region == DCCL_REGION_SEND && d.head.off == 0 && d.tail.region == DCCL_REGION_RECV,
        "kernel-to-kernel layout: head in the sender's region");
  check(d.ll_bytes == 40, "LL no larger than a bulk slot (%u bytes)", d.ll_bytes);
  dccl_conn_desc_layout(&d, NSLOTS, SLOT_BYTES, 1001, DCCL_REGION_RECV);
  check(d.ll_bytes == 1000, "LL in whole lines of units (%u bytes for 1001)", d.ll_bytes);
  bytes = dccl_conn_desc_layout(&d, NSLOTS, SLOT_BYTES, 0, DCCL_REGION_RECV);
  check(d.ll_bytes == 0 && d.protos == DCCL_PROTO_BIT(DCCL_PROTO_BULK) && d.ll_stride == 0 &&
            bytes == d.slots.off + NSLOTS * d.slot_stride,
        "without LL: bulk only, no LL area");
}

struct pair {
  struct dccl_conn tx, rx;
  void *region;
};

/* A FIFO in memory full of units that look fresh for position 0 (as reused memory may be), then initialised. */
static void pair_init(struct pair *p, int ll) {
  struct dccl_conn_desc d;
  uint64_t bytes = dccl_conn_desc_layout(&d, NSLOTS, SLOT_BYTES, ll ? DCCL_LL_MAX_BYTES : 0, DCCL_REGION_RECV);
  p->region = aligned_alloc(4096, (bytes + 4095) & ~(uint64_t)4095);
  uint64_t *u = p->region;
  for (uint64_t i = 0; i < bytes / 8; i++) u[i] = dccl_ll_unit(8, dccl_ll_flag(0));
  dccl_fifo_init(p->region, &d);
  memset(&p->tx, 0, sizeof(p->tx));
  memset(&p->rx, 0, sizeof(p->rx));
  p->tx.is_send = 1;
  check(dccl_conn_bind(&p->tx, &d, p->region, p->region) == ncclSuccess &&
            dccl_conn_bind(&p->rx, &d, p->region, p->region) == ncclSuccess,
        "bind");
  check(!ll == !p->rx.ll_stage, "LL staging exactly where the link carries LL");
}

static void pair_free(struct pair *p) {
  dccl_conn_unbind(&p->tx);
  dccl_conn_unbind(&p->rx);
  free(p->region);
}

static int send_one(struct pair *p, uint64_t bytes, int proto, uint64_t seq) {
  struct dccl_send_slot s;
  if (!dccl_conn_send_slot(&p->tx, bytes, proto, &s)) return -1;
  for (uint64_t i = 0; i < bytes; i++) ((unsigned char *)s.payload)[i] = (unsigned char)(seq * 31 + i);
  dccl_conn_send_post(&p->tx, &s, bytes, seq, 3);
  return s.proto;
}

/* 1 when the next slot arrived whole as sent by send_one. */
static int recv_one(struct pair *p, uint64_t bytes, uint64_t seq) {
  struct dccl_recv_slot r;
  if (!dccl_conn_recv_slot(&p->rx, &r)) return 0;
  int ok = r.h.bytes == bytes && r.h.seq == seq && r.h.kind == 3 && r.h.abort == 0;
  for (uint64_t i = 0; i < bytes && ok; i++) ok = ((const unsigned char *)r.payload)[i] == (unsigned char)(seq * 31 + i);
  dccl_conn_recv_done(&p->rx);
  return ok;
}

static void test_ll_flags(void) {
  struct pair p;
  pair_init(&p, 1);
  struct dccl_recv_slot r;
  check(!dccl_conn_recv_slot(&p.rx, &r), "units left in reused memory were taken for a slot");
  for (uint64_t i = 0; i < 3 * NSLOTS; i++) {
    uint64_t bytes = 1 + i * 13 % 200;
    check(send_one(&p, bytes, DCCL_PROTO_LL, 100 + i) == DCCL_PROTO_LL, "slot %llu not sent as LL",
          (unsigned long long)i);
    check(recv_one(&p, bytes, 100 + i) == 1, "LL slot %llu arrived wrong", (unsigned long long)i);
    /* The slot still holds this lap's units: the next lap must not see them as its own. */
    struct dccl_slot_header h;
    const char *slot = dccl_conn_slot(&p.rx.desc, p.rx.regions, i);
    const char *ll_slot = dccl_conn_ll_slot(&p.rx.desc, p.rx.regions, i);
    check(dccl_slot_poll(slot, ll_slot, i + NSLOTS, DCCL_LL_MAX_BYTES, &h, (uint32_t *)p.rx.ll_stage) ==
              DCCL_SLOT_NOT_YET,
          "slot %llu's units passed for the next lap's", (unsigned long long)i);
  }
  /* A torn slot: one payload unit still carries the previous lap's flag. */
  uint64_t pos = p.rx.own_counter;
  check(send_one(&p, 64, DCCL_PROTO_LL, 7) == DCCL_PROTO_LL, "LL send");
  uint64_t *unit = (uint64_t *)dccl_conn_ll_slot(&p.tx.desc, p.tx.regions, pos) + DCCL_LL_HEADER_UNITS + 5;
  uint64_t fresh = *unit;
  *unit = dccl_ll_unit((uint32_t)fresh, dccl_ll_flag(pos - NSLOTS));
  check(!dccl_conn_recv_slot(&p.rx, &r), "a slot with a stale unit was taken");
  *unit = fresh;
  check(recv_one(&p, 64, 7) == 1, "the slot, once whole, arrived wrong");
  pair_free(&p);
}

/* A bulk payload is the user's bytes: an int32 tensor whose every value is a later position's flag leaves units
 * that look fresh for that position. An LL slot whose line has not landed yet (a kernel's threads store their lines
 * in no order) must not be taken on them: the LL slots lie apart, so they still hold an older lap's units. */
static void test_stale_bulk_payload(void) {
  struct pair p;
  pair_init(&p, 1);
  uint64_t pos = p.rx.own_counter, later = pos + NSLOTS, bytes = 1024;
  struct dccl_send_slot s;
  memset(&s, 0, sizeof(s));
  check(dccl_conn_send_slot(&p.tx, bytes, DCCL_PROTO_BULK, &s) && s.proto == DCCL_PROTO_BULK, "bulk send");
  if (!s.payload) return;
  for (uint64_t i = 0; i < bytes / 8; i++) ((uint64_t *)s.payload)[i] = dccl_ll_unit(0x5a5a5a5a, dccl_ll_flag(later));
  dccl_conn_send_post(&p.tx, &s, bytes, 1, 3);
  struct dccl_recv_slot r;
  check(dccl_conn_recv_slot(&p.rx, &r) && r.h.bytes == bytes, "the bulk slot");
  dccl_conn_recv_done(&p.rx);
  for (uint64_t i = 1; i < NSLOTS; i++) {
    check(send_one(&p, 8, DCCL_PROTO_BULK, 10 + i) == DCCL_PROTO_BULK, "bulk send");
    check(recv_one(&p, 8, 10 + i) == 1, "bulk slot %llu", (unsigned long long)i);
  }
  /* Position `later` reuses the bulk slot's place; its LL slot, with one payload line not yet stored. */
  uint64_t *line = (uint64_t *)dccl_conn_ll_slot(&p.tx.desc, p.tx.regions, later) + DCCL_LL_HEADER_UNITS + 6;
  uint64_t before[2] = {line[0], line[1]};
  check(send_one(&p, 64, DCCL_PROTO_LL, 20) == DCCL_PROTO_LL, "LL send");
  uint64_t landed[2] = {line[0], line[1]};
  line[0] = before[0];
  line[1] = before[1];
  check(!dccl_conn_recv_slot(&p.rx, &r), "a line not yet stored passed on a bulk payload's bytes");
  line[0] = landed[0];
  line[1] = landed[1];
  check(recv_one(&p, 64, 20) == 1, "the LL slot, once whole, arrived wrong");
  pair_free(&p);
}

/* The producer chooses the protocol per slot; the consumer reads each as it came. */
static void test_mixed_protocols(void) {
  struct pair p;
  pair_init(&p, 1);
  check(send_one(&p, 100, DCCL_PROTO_BULK, 1) == DCCL_PROTO_BULK, "bulk send");
  check(recv_one(&p, 100, 1) == 1, "a bulk slot on an LL link");
  /* A bulk slot is taken once its unit 0 carries this lap's mark, whatever tail says. */
  uint64_t pos = p.rx.own_counter;
  check(send_one(&p, 100, DCCL_PROTO_BULK, 5) == DCCL_PROTO_BULK, "bulk send");
  uint64_t *unit0 = (uint64_t *)dccl_conn_slot(&p.tx.desc, p.tx.regions, pos), fresh = *unit0;
  *unit0 = dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(pos - NSLOTS));
  struct dccl_recv_slot early;
  check(!dccl_conn_recv_slot(&p.rx, &early), "a bulk slot with last lap's mark was taken");
  *unit0 = fresh;
  check(recv_one(&p, 100, 5) == 1, "the bulk slot, once marked, arrived wrong");
  check(send_one(&p, 100, DCCL_PROTO_LL, 2) == DCCL_PROTO_LL, "LL send");
  check(recv_one(&p, 100, 2) == 1, "an LL slot after a bulk one");
  check(send_one(&p, DCCL_LL_MAX_BYTES + 8, DCCL_PROTO_LL, 3) == DCCL_PROTO_BULK, "too large for LL: bulk");
  check(recv_one(&p, DCCL_LL_MAX_BYTES + 8, 3) == 1, "the large slot arrived wrong");
  /* Different sizes on the two ends: the header says what came. */
  struct dccl_recv_slot r;
  check(send_one(&p, 40, DCCL_PROTO_LL, 4) == DCCL_PROTO_LL, "LL send");
  check(dccl_conn_recv_slot(&p.rx, &r) && r.h.bytes == 40 && r.h.seq == 4,
        "an end expecting 9000 bytes must see the 40 that came");
  dccl_conn_recv_done(&p.rx);
  /* Four slots fill the FIFO; the fifth waits for the consumer. */
  for (uint64_t i = 0; i < NSLOTS; i++) check(send_one(&p, 8, DCCL_PROTO_LL, 10 + i) >= 0, "send into a free slot");
  check(send_one(&p, 8, DCCL_PROTO_LL, 99) < 0, "a full FIFO took another slot");
  check(recv_one(&p, 8, 10) == 1, "first of the full FIFO");
  check(send_one(&p, 8, DCCL_PROTO_LL, 14) >= 0, "a freed slot refused");
  pair_free(&p);
}

static void test_bulk_only_link(void) {
  struct pair p;
  pair_init(&p, 0);
  check(send_one(&p, 8, DCCL_PROTO_LL, 1) == DCCL_PROTO_BULK, "a link without LL sent LL");
  check(recv_one(&p, 8, 1) == 1, "bulk slot on a bulk-only link");
  pair_free(&p);
}

static void test_abort_word(void) {
  struct pair p;
  pair_init(&p, 1);
  check(dccl_conn_peer_aborted(&p.rx) == 0, "a fresh FIFO is aborted");
  check(dccl_cas0_u32(dccl_conn_aborted(&p.tx), 3) == 0, "the first abort found a value");
  check(dccl_cas0_u32(dccl_conn_aborted(&p.rx), 5) == 3, "the second abort did not find the first");
  check(dccl_conn_peer_aborted(&p.rx) == 3, "the first aborting rank must stay recorded");
  pair_free(&p);
}

/* The slot index takes 32 bits while the position fits and 64 past it: the same index either way, across the
 * boundary, for slot counts that do and do not divide 2^32. */
static void test_slot_index(void) {
  struct dccl_conn_desc d;
  const uint32_t counts[] = {1, 3, 4, 7, 8, 1000};
  const uint64_t around[] = {0, 1, 5, (1ull << 32) - 3, (1ull << 32) - 1, 1ull << 32, (1ull << 32) + 5,
                             (7ull << 40) + 11, UINT64_MAX};
  int wrong = 0;
  for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    dccl_conn_desc_layout(&d, counts[c], 64, 0, DCCL_REGION_RECV);
    for (unsigned i = 0; i < sizeof(around) / sizeof(around[0]); i++)
      if (dccl_conn_index(&d, around[i]) != around[i] % counts[c]) wrong++;
  }
  check(wrong == 0, "slot index = position %% slots on both sides of 2^32 (%d wrong)", wrong);
}

/* A region's base, chosen from both (dccl_conn_base), is the one the region names: words and slots land in the
 * receiver's region or the sender's as the layout says, whichever lies at the higher address. */
static void test_region_base(void) {
  char a[256], b[256];
  char *up[DCCL_REGIONS] = {a, b}, *down[DCCL_REGIONS] = {b, a};
  check(dccl_conn_base(up, DCCL_REGION_RECV) == a && dccl_conn_base(up, DCCL_REGION_SEND) == b,
        "region bases: receiver's region 0, sender's 1");
  check(dccl_conn_base(down, DCCL_REGION_RECV) == b && dccl_conn_base(down, DCCL_REGION_SEND) == a,
        "region bases, the other way round");
  struct dccl_conn_loc l = {.off = 40, .region = DCCL_REGION_SEND};
  check((char *)dccl_conn_word(up, l) == b + 40, "a word in the sender's region");
  l.region = DCCL_REGION_RECV;
  check((char *)dccl_conn_word(up, l) == a + 40, "a word in the receiver's region");
}

int main(void) {
  test_layout();
  test_slot_index();
  test_region_base();
  test_ll_flags();
  test_stale_bulk_payload();
  test_mixed_protocols();
  test_bulk_only_link();
  test_abort_word();
  printf("test_conn_desc: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
