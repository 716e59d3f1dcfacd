/* The connection descriptor: how one directed link's FIFO is laid out, in words that mean the same in C11, C++ and
 * CUDA, in either process and after an IPC mapping (docs/design.md, "Connections" and "Memory ordering").
 *
 * A FIFO is `nslots` slots and three shared words: `tail` (slots filled, advanced by the producer), `head` (slots
 * drained, advanced by the consumer), both 64-bit and only growing, each alone on a 128-byte line, and an abort
 * word. They may lie in two regions: the receiver's (DCCL_REGION_RECV) and the sender's (DCCL_REGION_SEND). The
 * descriptor names the region and offset of each; every process (or kernel) resolves them against its own mapping
 * of the regions, so the descriptor holds no pointer. A counter lives where its poller reads it cheapest among the
 * memory its writer can store to: kernel to kernel, tail and slots in the receiver's device memory and head in the
 * sender's; kernel to host or host to kernel, all in pinned host memory (no GDRCopy); host to host, one shared or
 * private region.
 *
 * Two protocols, chosen per FIFO position by the producer; each position has a bulk slot and, on links that carry
 * LL, an LL slot of its own in a separate area, and the first 8-byte unit of the slot used says which:
 *   - bulk: payload and header with plain stores, then unit 0 (DCCL_SLOT_BULK_MARK and the slot's flag) and
 *     `tail`, each with a release store. A consumer polls unit 0 where the producer writes the slots itself (it lies
 *     in the header's line, which the consumer reads anyway), else `tail`, which a transport advances once a slot
 *     has arrived whole (sockets, RDMA).
 *   - low latency (LL): the header and the payload go 4 bytes at a time into 8-byte units {data, flag}, each
 *     written and read as one access; the flag is the slot's FIFO position + 1, truncated to 32 bits, so a unit
 *     left from the LL slot's last use (nslots earlier, or more) never passes for a fresh one. No fence: a consumer
 *     polls the units themselves, in any order. Device code moves 16-byte lines (two units) per access. Twice the
 *     bytes, one hand-off less. LL slots lie apart from the bulk slots because a bulk payload is the user's bytes:
 *     in a shared slot, stale payload whose high words equal a later position's flag (an int32 tensor of that
 *     value) would pass for that position's units to a consumer that polls a unit its producer has not stored yet.
 * Nothing here calls the OS: it is shared by the host transports and by kernels. */
#ifndef DCCL_CONN_DESC_H_
#define DCCL_CONN_DESC_H_

#include <stdint.h>

#ifdef __CUDACC__
#define DCCL_CONN_FN __host__ __device__ static inline
#else
#define DCCL_CONN_FN static inline
#endif

#define DCCL_CACHELINE 128 /* a GPU's line; two of the host's, so no two counters ever share a host line */

/* ---- atomics on plain words: acquire/release at system scope (another process, the host or the GPU) ---- */

DCCL_CONN_FN uint64_t dccl_ld_acquire_u64(const uint64_t *p) {
#ifdef __CUDA_ARCH__
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}
DCCL_CONN_FN void dccl_st_release_u64(uint64_t *p, uint64_t v) {
#ifdef __CUDA_ARCH__
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}
/* One indivisible access that orders nothing else: a counter only its reader writes, an LL unit. */
DCCL_CONN_FN uint64_t dccl_ld_relaxed_u64(const uint64_t *p) {
#ifdef __CUDA_ARCH__
  uint64_t v;
  asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
DCCL_CONN_FN void dccl_st_relaxed_u64(uint64_t *p, uint64_t v) {
#ifdef __CUDA_ARCH__
  asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}
DCCL_CONN_FN uint32_t dccl_ld_acquire_u32(const uint32_t *p) {
#ifdef __CUDA_ARCH__
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}
#ifdef __CUDACC__ /* device code only, declared in nvcc's host pass too (a .cu file's host code may include it) */
/* The same at GPU scope, for a counter whose writer and reader are kernels on one GPU (one process or several
 * under MPS): the order is kept inside the GPU and no system-wide fence is paid. */
__device__ static inline uint64_t dccl_ld_acquire_gpu_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ static inline void dccl_st_release_gpu_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
#endif
/* Sets *p to v if it is 0 (the first to abort is the one named); returns the value found. */
DCCL_CONN_FN uint32_t dccl_cas0_u32(uint32_t *p, uint32_t v) {
#ifdef __CUDA_ARCH__
  return atomicCAS_system((unsigned int *)p, 0u, v);
#else
  uint32_t expected = 0;
  __atomic_compare_exchange_n(p, &expected, v, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  return expected;
#endif
}

/* ---- the FIFO's shared words ---- */

struct dccl_counter_line {
  uint64_t value;
  char pad[DCCL_CACHELINE - sizeof(uint64_t)];
};

/* The control block at the start of a receiver's region. `nslots` and `slot_bytes` are the creator's, for the
 * opener to check its own geometry against; slots are addressed with the descriptor's copies, never these. */
struct dccl_fifo_ctrl {
  struct dccl_counter_line head; /* unused when the descriptor puts head in the sender's region */
  struct dccl_counter_line tail;
  uint32_t aborted; /* 1 + the rank that first gave up; either side sets it, both poll it on the slow path */
  uint32_t nslots;
  uint64_t slot_bytes;
  char pad[DCCL_CACHELINE - 16];
};

/* ---- slots ---- */

/* The header every slot carries: the receiver checks seq and kind against the operation it runs, and the call's
 * fingerprint (count, what, root) against its own call's (host links; kernels leave them 0 so far). */
struct dccl_slot_header {
  uint64_t bytes; /* payload bytes in this slot */
  uint64_t seq;   /* operation sequence number (per comm for collectives, per peer/direction for p2p) */
  uint32_t kind;  /* enum dccl_op_kind */
  uint32_t abort; /* nonzero: the producer gave up (the payload is meaningless) */
  uint64_t count; /* the call's element count (per rank for all-gather and reduce-scatter); send: its bytes */
  uint32_t what;  /* the call's datatype + 1, and its reduction + 1 << 8 (0: none) */
  int32_t root;   /* the call's root, -1 without one */
};

#define DCCL_SLOT_HEAD_BYTES 64u          /* a bulk slot's payload starts this far in: unit 0, then the header */
/* A bulk payload this small rides in the rest of the header's line (after unit 0 and the 40-byte header), so the
 * consumer's one line read brings it: the host executor's smallest hand-off is one cache line, not two. */
#define DCCL_SLOT_INLINE_BYTES 16u
#define DCCL_SLOT_INLINE_OFF 48u
#define DCCL_SLOT_BULK_MARK 0xb01cb01cu   /* unit 0's data in a bulk slot, beside the slot's flag */
#define DCCL_LL_HEADER_UNITS 10u          /* the 40-byte header, 4 bytes per unit */
#define DCCL_LL_MAX_BYTES 4096u           /* the most payload an LL slot carries: 8 KiB of units plus the header */

enum dccl_proto { DCCL_PROTO_BULK = 0, DCCL_PROTO_LL = 1 };
#define DCCL_PROTO_BIT(p) (1u << (p))

enum dccl_region { DCCL_REGION_RECV = 0, DCCL_REGION_SEND = 1, DCCL_REGIONS = 2 };

/* Where one shared thing lies: a region and an offset in it. */
struct dccl_conn_loc {
  uint64_t off;
  uint32_t region; /* enum dccl_region */
  uint32_t pad;
};

/* One side's view of a link. Both sides hold the same values; each resolves them against its own mappings. */
struct dccl_conn_desc {
  struct dccl_conn_loc head, tail, aborted, slots;
  struct dccl_conn_loc ll_slots; /* the LL slots, apart from the bulk ones (unused without LL) */
  uint64_t slot_bytes;  /* bulk payload capacity of a slot */
  uint64_t slot_stride; /* bytes from one slot to the next */
  uint64_t ll_stride;   /* bytes from one LL slot to the next (0 without LL) */
  uint32_t nslots;
  uint32_t protos;   /* DCCL_PROTO_BIT of each protocol the link carries (bulk always) */
  uint32_t ll_bytes; /* the most payload an LL slot carries (0 without LL) */
  uint32_t pad;
};

/* ---- LL units ---- */

/* The flag of the units of the slot at FIFO position `pos`: never the flag of the same slot's previous use
 * (pos - nslots), nor 0 (fresh memory) before 2^32 slots. */
DCCL_CONN_FN uint32_t dccl_ll_flag(uint64_t pos) { return (uint32_t)(pos + 1); }
DCCL_CONN_FN uint64_t dccl_ll_unit(uint32_t data, uint32_t flag) { return (uint64_t)flag << 32 | data; }
/* Units holding an LL slot's header and `bytes` of payload, rounded up to whole 16-byte lines. */
DCCL_CONN_FN uint32_t dccl_ll_units(uint64_t bytes) {
  return (DCCL_LL_HEADER_UNITS + (uint32_t)((bytes + 3) / 4) + 1) & ~1u;
}

/* ---- the layout ---- */

/* Lays out a FIFO whose control block and slots lie in the receiver's region: the block, the bulk slots, then,
 * with `ll_bytes` > 0, an LL slot per position carrying up to that much payload (at most DCCL_LL_MAX_BYTES and the
 * bulk slot's size, in whole 16-byte lines). With head_region == DCCL_REGION_SEND the head counter is instead the
 * first line of the sender's region. Returns the receiver's region size; the sender's, when used, is
 * DCCL_CACHELINE. */
DCCL_CONN_FN uint64_t dccl_conn_desc_layout(struct dccl_conn_desc *d, uint32_t nslots, uint64_t slot_bytes,
                                            uint32_t ll_bytes, uint32_t head_region) {
  char *raw = (char *)d;
  for (unsigned i = 0; i < sizeof(*d); i++) raw[i] = 0;
  d->head.region = head_region; /* offset 0 in either region */
  d->tail.off = sizeof(struct dccl_counter_line);
  d->aborted.off = 2 * sizeof(struct dccl_counter_line);
  d->slots.off = sizeof(struct dccl_fifo_ctrl);
  d->nslots = nslots;
  d->slot_bytes = slot_bytes;
  /* Slots start on a 128-byte line (a GPU's line; a pair of host lines, which x86 fetches together), so a bulk
   * slot's header and its first 64 payload bytes are one transfer; payloads stay 64-byte aligned. */
  d->slot_stride = (DCCL_SLOT_HEAD_BYTES + slot_bytes + DCCL_CACHELINE - 1) & ~(uint64_t)(DCCL_CACHELINE - 1);
  d->protos = DCCL_PROTO_BIT(DCCL_PROTO_BULK);
  uint64_t end = d->slots.off + (uint64_t)nslots * d->slot_stride, ll = ll_bytes;
  if (ll > DCCL_LL_MAX_BYTES) ll = DCCL_LL_MAX_BYTES;
  if (ll > slot_bytes) ll = slot_bytes;
  ll &= ~(uint64_t)7; /* whole 16-byte lines of units */
  if (ll > 0) {
    d->protos |= DCCL_PROTO_BIT(DCCL_PROTO_LL);
    d->ll_bytes = (uint32_t)ll;
    d->ll_slots.off = end;
    d->ll_stride = ((uint64_t)dccl_ll_units(ll) * 8 + DCCL_CACHELINE - 1) & ~(uint64_t)(DCCL_CACHELINE - 1);
    end += (uint64_t)nslots * d->ll_stride;
  }
  return end;
}

/* regions[region] (a region is 0 or 1) as a choice between both bases, loaded beside `region`: a kernel that reads
 * a link's descriptor and bases from memory then waits for one round trip, not for the region and then the base
 * (the bit choice keeps the compiler from folding it back into a load at a computed address). */
DCCL_CONN_FN char *dccl_conn_base(char *const *regions, uint32_t region) {
  uintptr_t r0 = (uintptr_t)regions[0], r1 = (uintptr_t)regions[1];
  return (char *)(r0 ^ ((r0 ^ r1) & (0 - (uintptr_t)(region != 0))));
}

/* The address of a shared word, or of the slot at FIFO position `pos`, in this process's mapping of the regions. */
DCCL_CONN_FN uint64_t *dccl_conn_word(char *const *regions, struct dccl_conn_loc l) {
  return (uint64_t *)(dccl_conn_base(regions, l.region) + l.off);
}
/* The slot index of FIFO position `pos`, on 32 bits while `pos` fits: a 64-bit remainder is a long software
 * routine on a GPU, and a kernel's thread 0 takes it on every step of a small operation. */
DCCL_CONN_FN uint64_t dccl_conn_index(const struct dccl_conn_desc *d, uint64_t pos) {
  return pos >> 32 ? pos % d->nslots : (uint32_t)pos % d->nslots;
}
DCCL_CONN_FN char *dccl_conn_slot(const struct dccl_conn_desc *d, char *const *regions, uint64_t pos) {
  return dccl_conn_base(regions, d->slots.region) + d->slots.off + dccl_conn_index(d, pos) * d->slot_stride;
}
/* The LL slot of FIFO position `pos` (links that carry LL). */
DCCL_CONN_FN char *dccl_conn_ll_slot(const struct dccl_conn_desc *d, char *const *regions, uint64_t pos) {
  return dccl_conn_base(regions, d->ll_slots.region) + d->ll_slots.off + dccl_conn_index(d, pos) * d->ll_stride;
}

/* A 16-byte line of two units, as one access on the device (each half still carries its own flag, since only
 * 8-byte atomicity is relied on: PCIe and the host's loads may split the line). The device moves the line as two
 * 64-bit elements: PTX makes each element of a vector access single-copy atomic, so a unit's data and flag are
 * never torn apart (as four 32-bit elements they could be, formally). */
DCCL_CONN_FN void dccl_ll_store_line(uint64_t *line, uint32_t d0, uint32_t d1, uint32_t flag) {
#ifdef __CUDA_ARCH__
  asm volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"(dccl_ll_unit(d0, flag)),
               "l"(dccl_ll_unit(d1, flag))
               : "memory");
#else
  dccl_st_relaxed_u64(line, dccl_ll_unit(d0, flag));
  dccl_st_relaxed_u64(line + 1, dccl_ll_unit(d1, flag));
#endif
}
/* 1 when both halves carry `flag` (*d0, *d1 are then the line's data). */
DCCL_CONN_FN int dccl_ll_load_line(const uint64_t *line, uint32_t flag, uint32_t *d0, uint32_t *d1) {
#ifdef __CUDA_ARCH__
  uint64_t u0, u1;
  asm volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(u0), "=l"(u1) : "l"(line) : "memory");
  *d0 = (uint32_t)u0;
  *d1 = (uint32_t)u1;
  return (uint32_t)(u0 >> 32) == flag && (uint32_t)(u1 >> 32) == flag;
#else
  uint64_t u0 = dccl_ld_relaxed_u64(line), u1 = dccl_ld_relaxed_u64(line + 1);
  *d0 = (uint32_t)u0;
  *d1 = (uint32_t)u1;
  return (uint32_t)(u0 >> 32) == flag && (uint32_t)(u1 >> 32) == flag;
#endif
}

/* The header as ten 32-bit words (units 0..9), and back. */
DCCL_CONN_FN void dccl_ll_header_words(const struct dccl_slot_header *h, uint32_t w[DCCL_LL_HEADER_UNITS]) {
  w[0] = (uint32_t)h->bytes;
  w[1] = (uint32_t)(h->bytes >> 32);
  w[2] = (uint32_t)h->seq;
  w[3] = (uint32_t)(h->seq >> 32);
  w[4] = h->kind;
  w[5] = h->abort;
  w[6] = (uint32_t)h->count;
  w[7] = (uint32_t)(h->count >> 32);
  w[8] = h->what;
  w[9] = (uint32_t)h->root;
}
DCCL_CONN_FN void dccl_ll_header_from_words(const uint32_t w[DCCL_LL_HEADER_UNITS], struct dccl_slot_header *h) {
  h->bytes = (uint64_t)w[1] << 32 | w[0];
  h->seq = (uint64_t)w[3] << 32 | w[2];
  h->kind = w[4];
  h->abort = w[5];
  h->count = (uint64_t)w[7] << 32 | w[6];
  h->what = w[8];
  h->root = (int32_t)w[9];
}

/* Where a bulk payload of `bytes` starts in its slot (host links; kernels always use DCCL_SLOT_HEAD_BYTES). */
DCCL_CONN_FN uint32_t dccl_bulk_payload_off(uint64_t bytes) {
  return bytes <= DCCL_SLOT_INLINE_BYTES ? DCCL_SLOT_INLINE_OFF : DCCL_SLOT_HEAD_BYTES;
}

/* A bulk slot's header, then unit 0 with release (after the payload: a consumer polling the slot may then read
 * it); the producer publishes `tail` after this. */
DCCL_CONN_FN void dccl_bulk_write_head(char *slot, uint64_t pos, const struct dccl_slot_header *h) {
  *(struct dccl_slot_header *)(slot + 8) = *h;
  dccl_st_release_u64((uint64_t *)slot, dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(pos)));
}

/* One thread's LL slot: header and payload (4-byte aligned, read in whole 8-byte pairs of words) into the units of
 * the slot at FIFO position `pos`. The header's first line goes last: on the host, whose stores become visible in
 * order, a reader that sees it sees the whole slot (it checks every flag anyway). */
DCCL_CONN_FN void dccl_ll_write_slot(char *slot, uint64_t pos, const struct dccl_slot_header *h,
                                     const uint32_t *payload) {
  uint32_t w[DCCL_LL_HEADER_UNITS], flag = dccl_ll_flag(pos), nunits = dccl_ll_units(h->bytes);
  uint64_t *units = (uint64_t *)slot;
  dccl_ll_header_words(h, w);
  for (uint32_t i = DCCL_LL_HEADER_UNITS; i < nunits; i += 2, payload += 2)
    dccl_ll_store_line(units + i, payload[0], payload[1], flag);
  for (uint32_t i = DCCL_LL_HEADER_UNITS; i > 0; i -= 2) dccl_ll_store_line(units + i - 2, w[i - 2], w[i - 1], flag);
}

enum dccl_slot_read { DCCL_SLOT_NOT_YET = 0, DCCL_SLOT_LL = 1, DCCL_SLOT_BULK = 2 };
/* One thread's poll of FIFO position `pos` on a link whose producer writes its slots itself, in either protocol:
 * DCCL_SLOT_BULK once unit 0 of the bulk slot `slot` (loaded with acquire) is this lap's mark (stored last, with
 * release: the header and payload are there); DCCL_SLOT_LL once every unit of the LL slot `ll_slot` carries this
 * lap's flag, with the header in *h and the payload in `payload` (room for `cap` bytes rounded up to 8; a header
 * claiming more is returned with the payload unread, for the caller's size check to refuse); DCCL_SLOT_NOT_YET
 * before. No order among the LL loads is needed: each unit vouches for itself. */
DCCL_CONN_FN int dccl_slot_poll(const char *slot, const char *ll_slot, uint64_t pos, uint32_t cap,
                                struct dccl_slot_header *h, uint32_t *payload) {
  uint32_t w[DCCL_LL_HEADER_UNITS], flag = dccl_ll_flag(pos);
  if (dccl_ld_acquire_u64((const uint64_t *)slot) == dccl_ll_unit(DCCL_SLOT_BULK_MARK, flag)) return DCCL_SLOT_BULK;
  const uint64_t *units = (const uint64_t *)ll_slot;
  for (uint32_t i = 0; i < DCCL_LL_HEADER_UNITS; i += 2)
    if (!dccl_ll_load_line(units + i, flag, &w[i], &w[i + 1])) return DCCL_SLOT_NOT_YET;
  dccl_ll_header_from_words(w, h);
  if (h->bytes > cap) return DCCL_SLOT_LL;
  uint32_t nunits = dccl_ll_units(h->bytes);
  for (uint32_t i = DCCL_LL_HEADER_UNITS; i < nunits; i += 2, payload += 2)
    if (!dccl_ll_load_line(units + i, flag, &payload[0], &payload[1])) return DCCL_SLOT_NOT_YET;
  return DCCL_SLOT_LL;
}

#endif
