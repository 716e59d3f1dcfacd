/* The host thread's end of kernel <-> host FIFOs (conn_host_side.h), through the library's dccl_conn functions. */
#include "conn_host_side.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn_pattern.h"
#include "transports/transport.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void conn_host_fifo_init(struct conn_host_link *l) {
  memset(l->regions[DCCL_REGION_RECV], 0, l->desc.slots.off + (uint64_t)l->desc.nslots * l->desc.slot_stride);
  dccl_fifo_init(l->regions[DCCL_REGION_RECV], &l->desc);
}

static void bind(struct dccl_conn *c, struct conn_host_link *l, int is_send) {
  memset(c, 0, sizeof(*c));
  c->is_send = is_send;
  if (dccl_conn_bind(c, &l->desc, l->regions[DCCL_REGION_RECV], l->regions[DCCL_REGION_SEND]) != ncclSuccess) abort();
}

/* 1 when slot `pos` of FIFO `fifo` arrived as sent: header and every payload word. */
static int slot_ok(const struct dccl_recv_slot *r, uint32_t fifo, uint64_t pos, uint32_t bytes) {
  if (r->h.bytes != bytes || r->h.seq != pos || r->h.kind != CONN_KIND || r->h.abort) return 0;
  const uint32_t *w = r->payload;
  uint32_t bad = 0;
  for (uint32_t i = 0; i < bytes / 4; i++) bad |= w[i] ^ conn_pattern(fifo, pos, i);
  return bad == 0;
}

static void fill(uint32_t *w, uint32_t fifo, uint64_t pos, uint32_t bytes) {
  for (uint32_t i = 0; i < bytes / 4; i++) w[i] = conn_pattern(fifo, pos, i);
}

long conn_host_recv(struct conn_host_link *links, int nfifo, uint64_t n, uint32_t bytes, int proto, double timeout_s) {
  struct dccl_conn c[8];
  long bad = 0;
  uint64_t left = n * (uint64_t)nfifo;
  for (int f = 0; f < nfifo; f++) bind(&c[f], &links[f], 0);
  double last = now_s();
  while (left > 0) {
    int moved = 0;
    for (int f = 0; f < nfifo; f++) {
      struct dccl_recv_slot r;
      if (c[f].own_counter == n || !dccl_conn_recv_slot(&c[f], &r)) continue;
      if (!slot_ok(&r, (uint32_t)f, c[f].own_counter, bytes) && bad++ < 3)
        fprintf(stderr, "host: FIFO %d slot %llu arrived wrong (bytes %llu seq %llu)\n", f,
                (unsigned long long)c[f].own_counter, (unsigned long long)r.h.bytes, (unsigned long long)r.h.seq);
      dccl_conn_recv_done(&c[f]);
      left--;
      moved = 1;
    }
    if (moved) last = now_s();
    else if (now_s() - last > timeout_s) return -1;
  }
  return bad;
}

long conn_host_send(struct conn_host_link *links, int nfifo, uint64_t n, uint32_t bytes, int proto, double timeout_s) {
  struct dccl_conn c[8];
  uint64_t left = n * (uint64_t)nfifo;
  for (int f = 0; f < nfifo; f++) bind(&c[f], &links[f], 1);
  double last = now_s();
  while (left > 0) {
    int moved = 0;
    for (int f = 0; f < nfifo; f++) {
      struct dccl_send_slot s;
      if (c[f].own_counter == n || !dccl_conn_send_slot(&c[f], bytes, proto, &s)) continue;
      fill(s.payload, (uint32_t)f, s.pos, bytes);
      dccl_conn_send_post(&c[f], &s, bytes, s.pos, CONN_KIND);
      left--;
      moved = 1;
    }
    if (moved) last = now_s();
    else if (now_s() - last > timeout_s) return -1;
  }
  return 0;
}

long conn_host_echo(struct conn_host_link *in, struct conn_host_link *out, uint64_t n, uint32_t bytes, int proto,
                    double timeout_s) {
  struct dccl_conn ci, co;
  long bad = 0;
  bind(&ci, in, 0);
  bind(&co, out, 1);
  for (uint64_t i = 0; i < n; i++) {
    struct dccl_recv_slot r;
    struct dccl_send_slot s;
    double start = now_s();
    /* The clock is read every 4096 polls only: a round trip is a few microseconds. */
    for (uint32_t spin = 1; !dccl_conn_recv_slot(&ci, &r); spin++)
      if (spin % 4096 == 0 && now_s() - start > timeout_s) return -1;
    bad += !slot_ok(&r, 0, i, bytes);
    dccl_conn_recv_done(&ci);
    while (!dccl_conn_send_slot(&co, bytes, proto, &s))
      if (now_s() - start > timeout_s) return -1;
    fill(s.payload, 0, i, bytes);
    dccl_conn_send_post(&co, &s, bytes, i, CONN_KIND);
  }
  return bad;
}
