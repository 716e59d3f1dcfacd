#define _GNU_SOURCE
#include "topo/pci_topo.h"

#include <sched.h>

#ifdef DCCL_HAVE_HWLOC
#include <hwloc.h>

/* Hops between two objects of the tree: up from each to their lowest common ancestor. */
static int hops_between(hwloc_obj_t a, hwloc_obj_t b) {
  int up_a = 0;
  for (hwloc_obj_t p = a; p; p = p->parent, up_a++) {
    int up_b = 0;
    for (hwloc_obj_t q = b; q; q = q->parent, up_b++)
      if (p == q) return up_a + up_b;
  }
  return -1;
}

/* The smallest object holding every CPU this process may run on (the machine when unknown). */
static hwloc_obj_t cpus_object(hwloc_topology_t topo) {
  cpu_set_t set;
  hwloc_bitmap_t mine = hwloc_bitmap_alloc();
  hwloc_obj_t obj = hwloc_get_root_obj(topo);
  if (mine && sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) hwloc_bitmap_set(mine, (unsigned)c);
    hwloc_bitmap_and(mine, mine, hwloc_topology_get_topology_cpuset(topo));
    if (!hwloc_bitmap_iszero(mine)) {
      hwloc_obj_t covering = hwloc_get_obj_covering_cpuset(topo, mine);
      if (covering) obj = covering;
    }
  }
  hwloc_bitmap_free(mine);
  return obj;
}

int dccl_pci_nearest(const char *anchor, const char *const *cands, int n, int *hops) {
  for (int i = 0; i < n; i++) hops[i] = -1;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return -1;
  int best = -1;
  if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) == 0 && hwloc_topology_load(topo) == 0) {
    hwloc_obj_t from = anchor ? hwloc_get_pcidev_by_busidstring(topo, anchor) : cpus_object(topo);
    for (int i = 0; from && i < n; i++) {
      hwloc_obj_t dev = cands[i] ? hwloc_get_pcidev_by_busidstring(topo, cands[i]) : NULL;
      hops[i] = dev ? hops_between(from, dev) : -1;
      if (hops[i] >= 0 && (best < 0 || hops[i] < hops[best])) best = i;
    }
  }
  hwloc_topology_destroy(topo);
  return best;
}

#else

int dccl_pci_nearest(const char *anchor, const char *const *cands, int n, int *hops) {
  (void)anchor;
  (void)cands;
  for (int i = 0; i < n; i++) hops[i] = -1;
  return -1;
}

#endif
