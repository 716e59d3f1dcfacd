#define _GNU_SOURCE
#include "topo/cpu_topo.h"

#include <pthread.h>
#include <sched.h>

#include "util/log.h"

#ifdef DCCL_HAVE_HWLOC
#include <hwloc.h>
#endif

static int affinity_pus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

static struct dccl_cpu_topo topo_read;
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;

static void read_once(void) {
  struct dccl_cpu_topo *out = &topo_read;
  out->pus = affinity_pus();
  out->numa_nodes = 1;
#ifdef DCCL_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    int pus = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(topo));
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    if (pus > 0) out->pus = pus;
    if (numa > 0) out->numa_nodes = numa;
    hwloc_topology_destroy(topo);
  }
#endif
  DCCL_INFO(DCCL_INIT, "cpu topology: %d processing units, %d NUMA nodes", out->pus, out->numa_nodes);
}

/* Loading hwloc's topology reads sysfs for milliseconds: once per process, not per communicator. */
void dccl_cpu_topo_read(struct dccl_cpu_topo *out) {
  pthread_once(&topo_once, read_once);
  *out = topo_read;
}
