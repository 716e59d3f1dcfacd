#include "topo/ring_order.h"

int dccl_ring_order(const uint64_t *host_hash, int nranks, int *order) {
  int placed = 0, nhosts = 0;
  for (int r = 0; r < nranks; r++) {
    int first = 1; /* is r the lowest rank of its host? */
    for (int q = 0; q < r && first; q++)
      if (host_hash[q] == host_hash[r]) first = 0;
    if (!first) continue;
    nhosts++;
    for (int q = r; q < nranks; q++)
      if (host_hash[q] == host_hash[r]) order[placed++] = q;
  }
  return nhosts;
}

int dccl_ring_busiest_host(const uint64_t *host_hash, const int *order, int nranks) {
  int busiest = 0, run = 0;
  for (int i = 0; i < nranks; i++) {
    run = i > 0 && host_hash[order[i]] == host_hash[order[i - 1]] ? run + 1 : 1;
    if (run > busiest) busiest = run;
  }
  return busiest;
}

int dccl_ring_host_crossings(const uint64_t *host_hash, const int *order, int nranks) {
  int crossings = 0;
  for (int i = 0; i < nranks; i++)
    if (host_hash[order[i]] != host_hash[order[(i + 1) % nranks]]) crossings++;
  return crossings;
}
