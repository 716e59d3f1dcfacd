/* Item 2 of the measurements: the kernel-to-kernel round trip. Side 0's kernel stores i to side 1's flag and
 * waits for i in its own; side 1's kernel answers. Each side polls its own memory and writes the peer's through
 * the mapping. Side 0 stamps every round trip with the GPU's global timer. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"
#include "kernels.h"
#include "pair.h"
#include "unix_msg.h"

#define KERNEL_TIMEOUT_NS (20ull * 1000 * 1000 * 1000)

/* One run of n round trips; side 0's process gets the per-round-trip times in us (rt, n entries). */
static int run(struct pair *p, int n, double *rt) {
  pair_reset_flags(p);
  for (int i = 0; i < 2; i++) {
    if (!pair_mine(p, i)) continue;
    struct side *s = &p->side[i];
    int err = i == 0 ? ping_launch(s->peer, s->own.ptr, n, s->stamps, s->status, KERNEL_TIMEOUT_NS, s->stream)
                     : pong_launch(s->peer, s->own.ptr, n, s->status, KERNEL_TIMEOUT_NS, s->stream);
    if (err) {
      printf("FAILED: launch on side %d: cudaError %d\n", i, err);
      exit(2);
    }
  }
  pair_wait(p, 30, "kernel round trip");
  int status[2][2] = {{0, 0}, {0, 0}};
  for (int i = 0; i < 2; i++)
    if (pair_mine(p, i)) CU_MUST(cuMemcpyDtoH(status[i], p->side[i].status, sizeof status[i]));
  if (!p->local && (p->role == 0 ? msg_recv(p->sock, status[1], sizeof status[1], NULL)
                                 : msg_send(p->sock, status[1], sizeof status[1], -1))) {
    printf("FAILED: the peer's status did not come\n");
    exit(2);
  }
  if (p->role != 0) return n;
  if (status[0][1] || status[1][1] || status[0][0] != n) {
    printf("FAILED: round trips: side 0 did %d of %d%s, side 1 %d%s\n", status[0][0], n,
           status[0][1] ? " (timed out)" : "", status[1][0], status[1][1] ? " (timed out)" : "");
    exit(2);
  }
  uint64_t *stamps = malloc((size_t)(n + 1) * sizeof *stamps);
  CU_MUST(cuMemcpyDtoH(stamps, p->side[0].stamps, (size_t)(n + 1) * sizeof *stamps));
  for (int i = 0; i < n; i++) rt[i] = (double)(stamps[i + 1] - stamps[i]) / 1e3;
  free(stamps);
  return n;
}

void measure_kernel_roundtrip(struct pair *p) {
  double *rt = malloc(PAIR_MAX_ITERS * sizeof *rt);
  /* A short probe sizes the real run to about the budget: 4.5 ms per round trip without MPS, 1.6 us with. */
  int n = 20;
  run(p, n, rt);
  if (p->role == 0) {
    double probe = median(rt, (size_t)n);
    double want = p->budget_us / (probe > 0.1 ? probe : 0.1);
    n = want < 50 ? 50 : want > PAIR_MAX_ITERS ? PAIR_MAX_ITERS : (int)want;
  }
  pair_agree(p, &n);
  run(p, n, rt);
  if (p->role == 0) {
    /* The first tenth is warm-up. Batches of 100 give a figure that does not depend on the timer's resolution. */
    int skip = n / 10, m = n - skip, batches = m / 100;
    double total = 0, *batch = malloc((size_t)(batches + 1) * sizeof *batch);
    for (int b = 0; b < batches; b++) {
      double sum = 0;
      for (int i = 0; i < 100; i++) sum += rt[skip + b * 100 + i];
      batch[b] = sum / 100;
    }
    for (int i = skip; i < n; i++) total += rt[i];
    double *v = rt + skip, min_nonzero = 1e30;
    for (int i = 0; i < m; i++)
      if (v[i] > 0 && v[i] < min_nonzero) min_nonzero = v[i];
    double med = median(v, (size_t)m);
    printf(
        "kernel flag round trip (8-byte flags, acquire/release.sys): median %.3f us of %d (p10 %.3f, p90 %.3f, "
        "max %.1f, mean %.3f, smallest step %.3f us)",
        med, m, percentile_sorted(v, (size_t)m, 10), percentile_sorted(v, (size_t)m, 90), v[m - 1], total / m,
        min_nonzero);
    if (batches > 0) printf("; median of %d batch means of 100: %.3f us", batches, median(batch, (size_t)batches));
    printf("\n");
    free(batch);
  }
  free(rt);
}
