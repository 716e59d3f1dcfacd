// One CTA's end of a FIFO laid out by pure/conn_desc.h: the device half of the protocols, as the GPU engine will
// run them (one CTA of CONN_THREADS threads per FIFO). Payloads are conn_pattern words, checked word by word.
//   bulk send: every thread stores its share of the payload; barrier; thread 0 writes the header and publishes
//              tail with st.release.sys. bulk receive: thread 0 polls tail with ld.acquire.sys; barrier; every
//              thread reads and checks its share (ld.cv: the L1 holds nothing stale); barrier; thread 0 releases
//              head.
//   LL send: each thread stores its 16-byte lines (one st.volatile.v4 each, a flag in each 8-byte half), no fence.
//   LL receive: each thread polls its own lines until both flags match; barrier; thread 0 releases head.
// Credits: thread 0 keeps the consumer's head as last read and re-reads it (acquire) only when the FIFO looks full.
// Every spin gives up after CONN_SPIN_LIMIT_NS and raises a shared abort word, after which every spin returns at once,
// so a lost slot fails the test instead of hanging the GPU. (Loops never test that word themselves: threads of a CTA
// could read it differently and part at a barrier.)
#ifndef DCCL_CONN_DEVICE_CUH_
#define DCCL_CONN_DEVICE_CUH_

#include <stdint.h>

#include "conn_pattern.h"
#include "pure/conn_desc.h"

#define CONN_SPIN_LIMIT_NS 20000000000ull

struct dev_link {
  struct dccl_conn_desc desc;
  char *regions[DCCL_REGIONS];  // this process's (device-visible) mapping of each region
};

// Results one launch reports: wrong words or headers, whether a spin gave up, and the timed span.
struct dev_result {
  unsigned long long errors;
  unsigned int aborted;
  unsigned long long t0_ns, t1_ns;
};

__device__ static inline uint64_t dev_now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 1 while the spin that began at `start` may go on.
__device__ static inline bool dev_spin_ok(dev_result *res, uint64_t start) {
  if (*(volatile unsigned int *)&res->aborted) return false;
  if (dev_now_ns() - start < CONN_SPIN_LIMIT_NS) return true;
  atomicExch(&res->aborted, 1u);
  return false;
}

// One CTA's position in one FIFO; `cached` is thread 0's copy of the other side's counter.
struct cta_fifo {
  dev_link l;
  uint32_t fifo;
  uint64_t pos, cached;
};

__device__ static inline void cta_send_wait(cta_fifo &c, dev_result *res) {
  if (threadIdx.x == 0) {
    uint64_t start = dev_now_ns();
    while (c.pos - c.cached >= c.l.desc.nslots && dev_spin_ok(res, start))
      c.cached = dccl_ld_acquire_u64(dccl_conn_word(c.l.regions, c.l.desc.head));
  }
  __syncthreads();
}

// A slot's header as the host end writes it (dccl_conn_send_post: no call fingerprint, root -1).
__device__ static inline struct dccl_slot_header conn_header(const cta_fifo &c, uint32_t bytes) {
  struct dccl_slot_header h = {bytes, c.pos, CONN_KIND, 0, 0, 0, -1};
  return h;
}

__device__ static inline void cta_send_bulk(cta_fifo &c, uint32_t bytes, dev_result *res) {
  cta_send_wait(c, res);
  char *slot = dccl_conn_slot(&c.l.desc, c.l.regions, c.pos);
  uint4 *p = (uint4 *)(slot + dccl_bulk_payload_off(bytes)); /* the host's layout: small payloads inline */
  for (uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x)
    p[i] = make_uint4(conn_pattern(c.fifo, c.pos, 4 * i), conn_pattern(c.fifo, c.pos, 4 * i + 1),
                      conn_pattern(c.fifo, c.pos, 4 * i + 2), conn_pattern(c.fifo, c.pos, 4 * i + 3));
  for (uint32_t w = bytes / 16 * 4 + threadIdx.x; w < bytes / 4; w += blockDim.x)  // a tail of whole words
    ((uint32_t *)p)[w] = conn_pattern(c.fifo, c.pos, w);
  __syncthreads();
  if (threadIdx.x == 0) {
    struct dccl_slot_header h = conn_header(c, bytes);
    dccl_bulk_write_head(slot, c.pos, &h);
    dccl_st_release_u64(dccl_conn_word(c.l.regions, c.l.desc.tail), c.pos + 1);
  }
  c.pos++;
}

// Line `line` of an LL slot carrying header h: header words for lines 0..2, payload words after.
__device__ static inline void ll_line_words(const cta_fifo &c, const uint32_t *hw, uint32_t line, uint32_t *d0,
                                            uint32_t *d1) {
  if (line < DCCL_LL_HEADER_UNITS / 2) {
    *d0 = hw[2 * line];
    *d1 = hw[2 * line + 1];
  } else {
    uint32_t w = 2 * (line - DCCL_LL_HEADER_UNITS / 2);
    *d0 = conn_pattern(c.fifo, c.pos, w);
    *d1 = conn_pattern(c.fifo, c.pos, w + 1);
  }
}

// LL: no barrier after the stores; tail is advanced (relaxed) only for consumers that poll it, which check the
// flags anyway.
__device__ static inline void cta_send_ll(cta_fifo &c, uint32_t bytes, dev_result *res) {
  cta_send_wait(c, res);
  uint64_t *units = (uint64_t *)dccl_conn_ll_slot(&c.l.desc, c.l.regions, c.pos);
  struct dccl_slot_header h = conn_header(c, bytes);
  uint32_t hw[DCCL_LL_HEADER_UNITS], flag = dccl_ll_flag(c.pos), nlines = dccl_ll_units(bytes) / 2;
  dccl_ll_header_words(&h, hw);
  for (uint32_t line = threadIdx.x; line < nlines; line += blockDim.x) {
    uint32_t d0, d1;
    ll_line_words(c, hw, line, &d0, &d1);
    dccl_ll_store_line(units + 2 * line, d0, d1, flag);
  }
  if (threadIdx.x == 0) dccl_st_relaxed_u64(dccl_conn_word(c.l.regions, c.l.desc.tail), c.pos + 1);
  c.pos++;
}

__device__ static inline void cta_recv_done(cta_fifo &c) {
  __syncthreads();  // every thread has read the slot
  if (threadIdx.x == 0) dccl_st_release_u64(dccl_conn_word(c.l.regions, c.l.desc.head), c.pos + 1);
  c.pos++;
}

__device__ static inline void cta_recv_bulk(cta_fifo &c, uint32_t bytes, dev_result *res) {
  char *slot = dccl_conn_slot(&c.l.desc, c.l.regions, c.pos);
  if (threadIdx.x == 0) {
    uint64_t start = dev_now_ns();
    while (c.cached <= c.pos && dev_spin_ok(res, start))
      c.cached = dccl_ld_acquire_u64(dccl_conn_word(c.l.regions, c.l.desc.tail));
    const struct dccl_slot_header *h = (const struct dccl_slot_header *)(slot + 8);
    uint64_t unit0 = dccl_ld_relaxed_u64((const uint64_t *)slot);
    if (unit0 != dccl_ll_unit(DCCL_SLOT_BULK_MARK, dccl_ll_flag(c.pos)) || h->bytes != bytes || h->seq != c.pos ||
        h->kind != CONN_KIND || h->abort != 0)
      atomicAdd(&res->errors, 1ull);
  }
  __syncthreads();
  const uint4 *p = (const uint4 *)(slot + dccl_bulk_payload_off(bytes));
  unsigned long long bad = 0;
  for (uint32_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
    uint4 v = __ldcv(p + i);
    bad += (v.x != conn_pattern(c.fifo, c.pos, 4 * i)) | (v.y != conn_pattern(c.fifo, c.pos, 4 * i + 1)) |
           (v.z != conn_pattern(c.fifo, c.pos, 4 * i + 2)) | (v.w != conn_pattern(c.fifo, c.pos, 4 * i + 3));
  }
  for (uint32_t w = bytes / 16 * 4 + threadIdx.x; w < bytes / 4; w += blockDim.x)
    bad += __ldcv((const unsigned int *)p + w) != conn_pattern(c.fifo, c.pos, w);
  if (bad) atomicAdd(&res->errors, bad);
  cta_recv_done(c);
}

__device__ static inline void cta_recv_ll(cta_fifo &c, uint32_t bytes, dev_result *res) {
  const uint64_t *units = (const uint64_t *)dccl_conn_ll_slot(&c.l.desc, c.l.regions, c.pos);
  struct dccl_slot_header h = conn_header(c, bytes);
  uint32_t hw[DCCL_LL_HEADER_UNITS], flag = dccl_ll_flag(c.pos), nlines = dccl_ll_units(bytes) / 2;
  dccl_ll_header_words(&h, hw);
  unsigned long long bad = 0;
  for (uint32_t line = threadIdx.x; line < nlines; line += blockDim.x) {
    uint32_t d0, d1, e0, e1;
    uint64_t start = dev_now_ns();
    while (!dccl_ll_load_line(units + 2 * line, flag, &d0, &d1) && dev_spin_ok(res, start)) {
    }
    ll_line_words(c, hw, line, &e0, &e1);
    bad += (d0 != e0) | (d1 != e1);
  }
  if (bad) atomicAdd(&res->errors, bad);
  cta_recv_done(c);
}

__device__ static inline void cta_send(cta_fifo &c, int proto, uint32_t bytes, dev_result *res) {
  if (proto == DCCL_PROTO_LL) cta_send_ll(c, bytes, res);
  else cta_send_bulk(c, bytes, res);
}
__device__ static inline void cta_recv(cta_fifo &c, int proto, uint32_t bytes, dev_result *res) {
  if (proto == DCCL_PROTO_LL) cta_recv_ll(c, bytes, res);
  else cta_recv_bulk(c, bytes, res);
}

__device__ static inline cta_fifo cta_fifo_at(const dev_link *links, uint32_t fifo) {
  cta_fifo c;
  c.l = links[fifo];
  c.fifo = fifo;
  c.pos = 0;
  c.cached = 0;
  return c;
}

// Streams n slots per FIFO, CTA b on FIFO b; the span runs from the first CTA's start to the last one's end.
__global__ void k_stream(const dev_link *links, int is_send, uint64_t n, uint32_t bytes, int proto, dev_result *res) {
  cta_fifo c = cta_fifo_at(links, blockIdx.x);
  if (threadIdx.x == 0) atomicMin(&res->t0_ns, (unsigned long long)dev_now_ns());
  for (uint64_t i = 0; i < n; i++) {  // after an abort every spin returns at once: the loop ends quickly
    if (is_send) cta_send(c, proto, bytes, res);
    else cta_recv(c, proto, bytes, res);
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&res->t1_ns, (unsigned long long)dev_now_ns());
}

// Ping-pong on FIFO 0 of `out` and `in`: the pinger sends then waits for the echo; the ponger the reverse. The span
// covers the n - warm round trips after the first `warm`.
__global__ void k_pingpong(const dev_link *out, const dev_link *in, int pinger, uint64_t n, uint64_t warm,
                           uint32_t bytes, int proto, dev_result *res) {
  cta_fifo co = cta_fifo_at(out, 0), ci = cta_fifo_at(in, 0);
  for (uint64_t i = 0; i < n; i++) {
    if (i == warm && threadIdx.x == 0) res->t0_ns = dev_now_ns();
    if (pinger) cta_send(co, proto, bytes, res);
    cta_recv(ci, proto, bytes, res);
    if (!pinger) cta_send(co, proto, bytes, res);
  }
  if (threadIdx.x == 0) res->t1_ns = dev_now_ns();
}

#endif
