/* Item 4 of the measurements: copies between the two sides ordered by stream memory operations, no kernel
 * spinning. Side 0 copies its payload into side 1's inbox and bumps side 1's 32-bit flag (cuStreamWriteValue32);
 * side 1's stream waits for it (cuStreamWaitValue32), copies the inbox back into side 0's inbox and bumps side
 * 0's flag, which side 0's stream waits for: an echo. The copy is a copy-engine memcpy or a copy kernel. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"
#include "kernels.h"
#include "pair.h"

enum copy_method { BY_COPY_ENGINE, BY_KERNEL };
static const char *method_name[] = {"copy engine (cuMemcpyDtoDAsync)", "copy kernel"};

static void copy(struct pair *p, enum copy_method how, CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  if (how == BY_COPY_ENGINE) {
    CU_MUST(cuMemcpyDtoDAsync(dst, src, bytes, s));
    return;
  }
  int err = copy_launch(dst, src, bytes, p->sms, s);
  if (err) {
    printf("FAILED: copy kernel launch: cudaError %d\n", err);
    exit(2);
  }
}

static void step(struct pair *p, int i, int iter, enum copy_method how, size_t bytes) {
  struct side *s = &p->side[i];
  CUdeviceptr own_flag = s->own.ptr + PAIR_FLAG32, peer_flag = s->peer + PAIR_FLAG32;
  if (i == 0) {
    copy(p, how, s->peer + PAIR_INBOX, s->src, bytes, s->stream);
    CU_MUST(cuStreamWriteValue32(s->stream, peer_flag, (cuuint32_t)iter, CU_STREAM_WRITE_VALUE_DEFAULT));
    CU_MUST(cuStreamWaitValue32(s->stream, own_flag, (cuuint32_t)iter, CU_STREAM_WAIT_VALUE_GEQ));
    CU_MUST(cuEventRecord(s->events[iter], s->stream));
  } else {
    CU_MUST(cuStreamWaitValue32(s->stream, own_flag, (cuuint32_t)iter, CU_STREAM_WAIT_VALUE_GEQ));
    copy(p, how, s->peer + PAIR_INBOX, s->own.ptr + PAIR_INBOX, bytes, s->stream);
    CU_MUST(cuStreamWriteValue32(s->stream, peer_flag, (cuuint32_t)iter, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
}

/* n echoes in batches of PAIR_ECHO_BATCH. Each batch is queued behind a gate on side 0's stream that opens once
 * both processes have queued it all, so the round trips are the GPU's and not how fast the host queues work.
 * Side 0's process gets each round trip in us (rt), the host's queueing time per round trip (*queue_us), and
 * checks that its payload came back. */
static void echo(struct pair *p, enum copy_method how, size_t bytes, int n, double *rt, double *queue_us) {
  struct side *s0 = &p->side[0];
  if (pair_mine(p, 0)) {
    CU_MUST(cuMemsetD8(s0->own.ptr + PAIR_INBOX, 0, 16));
    CU_MUST(cuMemsetD8(s0->own.ptr + PAIR_INBOX + bytes - 8, 0, 8));
  }
  pair_reset_flags(p);
  double queued = 0;
  for (int b = 0; b * PAIR_ECHO_BATCH < n; b++) {
    int first = b * PAIR_ECHO_BATCH + 1, last = first + PAIR_ECHO_BATCH - 1 < n ? first + PAIR_ECHO_BATCH - 1 : n;
    double t0 = now_us();
    if (pair_mine(p, 0)) {
      CU_MUST(cuStreamWaitValue32(s0->stream, s0->own.ptr + PAIR_GATE, (cuuint32_t)b + 1, CU_STREAM_WAIT_VALUE_GEQ));
      CU_MUST(cuEventRecord(s0->batch_start[b], s0->stream));
    }
    for (int iter = first; iter <= last; iter++)
      for (int i = 0; i < 2; i++)
        if (pair_mine(p, i)) step(p, i, iter, how, bytes);
    queued += now_us() - t0;
    pair_barrier(p);
    if (pair_mine(p, 0))
      CU_MUST(
          cuStreamWriteValue32(s0->gate, s0->own.ptr + PAIR_GATE, (cuuint32_t)b + 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  pair_wait(p, 60, "stream-ordered echo");
  pair_barrier(p);
  if (p->role != 0) return;
  *queue_us = queued / n;
  for (int i = 1; i <= n; i++) {
    float ms = 0;
    CUevent before = (i - 1) % PAIR_ECHO_BATCH == 0 ? s0->batch_start[(i - 1) / PAIR_ECHO_BATCH] : s0->events[i - 1];
    CU_MUST(cuEventElapsedTime(&ms, before, s0->events[i]));
    rt[i - 1] = ms * 1e3;
  }
  uint32_t want[2], got[2];
  CU_MUST(cuMemcpyDtoH(want, s0->src + bytes - 8, 8));
  CU_MUST(cuMemcpyDtoH(got, s0->own.ptr + PAIR_INBOX + bytes - 8, 8));
  if (want[0] != got[0] || want[1] != got[1]) {
    printf("FAILED: echo of %zu B: the payload did not come back (0x%08x, want 0x%08x)\n", bytes, got[0], want[0]);
    exit(2);
  }
}

static void measure_echo(struct pair *p, enum copy_method how, size_t bytes) {
  double rt[PAIR_MAX_EVENTS];
  int n = bytes > 4096 ? 3 : 10, max = bytes > 4096 ? 50 : PAIR_MAX_EVENTS - 1;
  double queue_us = 0;
  echo(p, how, bytes, n, rt, &queue_us);
  if (p->role == 0) {
    double want = p->budget_us / median(rt, (size_t)n);
    n = want < 5 ? 5 : want > max ? max : (int)want;
  }
  pair_agree(p, &n);
  echo(p, how, bytes, n, rt, &queue_us);
  if (p->role != 0) return;
  int skip = n >= 20 ? n / 10 : 1, m = n - skip;
  double *v = rt + skip, total = 0;
  for (int i = 0; i < m; i++) total += v[i];
  double med = median(v, (size_t)m);
  printf("stream-ordered echo, %s, %zu B: round trip median %.2f us of %d (p10 %.2f, p90 %.2f, mean %.2f)",
         method_name[how], bytes, med, m, percentile_sorted(v, (size_t)m, 10), percentile_sorted(v, (size_t)m, 90),
         total / m);
  /* Two copies, one each way, per round trip. */
  if (bytes > 4096) printf(": %.0f GB/s per copy", (double)bytes / (med / 2) / 1e3);
  printf("; the host queued it in %.2f us per round trip\n", queue_us);
}

/* Side 0 alone copies PAIR_BYTES into dst ten times; events time each copy. */
static void measure_one_way(struct pair *p, enum copy_method how, int to_peer) {
  pair_barrier(p);
  if (p->role == 0) {
    struct side *s = &p->side[0];
    CUdeviceptr dst = (to_peer ? s->peer : s->own.ptr) + PAIR_INBOX;
    enum { REPS = 12 };
    double t[REPS];
    copy(p, how, dst, s->src, PAIR_BYTES, s->stream); /* warm-up */
    for (int r = 0; r <= REPS; r++) {
      CU_MUST(cuEventRecord(s->events[r], s->stream));
      if (r < REPS) copy(p, how, dst, s->src, PAIR_BYTES, s->stream);
    }
    CU_MUST(stream_wait(s->stream, 30));
    for (int r = 0; r < REPS; r++) {
      float ms = 0;
      CU_MUST(cuEventElapsedTime(&ms, s->events[r], s->events[r + 1]));
      t[r] = ms * 1e3;
    }
    double med = median(t, REPS);
    printf("one-way %zu MiB, %s, into %s: median %.1f us of %d: %.0f GB/s\n", PAIR_BYTES >> 20, method_name[how],
           to_peer ? "the peer's memory (mapped)" : "its own memory", med, REPS, (double)PAIR_BYTES / med / 1e3);
  }
  pair_barrier(p);
}

void measure_stream_copies(struct pair *p) {
  for (int how = BY_COPY_ENGINE; how <= BY_KERNEL; how++) {
    measure_echo(p, (enum copy_method)how, 8);
    measure_echo(p, (enum copy_method)how, PAIR_BYTES);
  }
  for (int how = BY_COPY_ENGINE; how <= BY_KERNEL; how++)
    for (int to_peer = 0; to_peer < 2; to_peer++) measure_one_way(p, (enum copy_method)how, to_peer);
}
