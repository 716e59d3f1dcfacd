#define _GNU_SOURCE
#include "topo/cpu_topo.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

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

/* The processing units of the allowed cpuset (a container's) from hwloc; 0 when unknown. */
static int allowed_pus(void) {
  int pus = 0;
#ifdef DCCL_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return 0;
  if (hwloc_topology_load(topo) == 0) pus = hwloc_bitmap_weight(hwloc_topology_get_allowed_cpuset(topo));
  hwloc_topology_destroy(topo);
#endif
  return pus > 0 ? pus : 0;
}

static struct dccl_cpu_topo topo_read;
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;

/* The affinity mask lies inside the allowed cpuset, which lies inside the online CPUs: a mask of every online CPU
 * is the answer. Only a narrower mask (a rank bound to its cores, or a container) needs hwloc, whose load costs
 * 20 ms of CPU per process here (it loads its plugins): 160 ms for 8 ranks sharing 2 cores. */
static void read_once(void) {
  int pus = affinity_pus(), allowed = 0;
  if (pus < sysconf(_SC_NPROCESSORS_ONLN) && (allowed = allowed_pus()) > 0) pus = allowed;
  topo_read.pus = pus;
  DCCL_INFO(DCCL_INIT, "cpu topology: %d processing units (%s)", pus,
            allowed ? "hwloc's allowed cpuset" : "the affinity mask");
}

/* Once per process, not per communicator. */
void dccl_cpu_topo_read(struct dccl_cpu_topo *out) {
  pthread_once(&topo_once, read_once);
  *out = topo_read;
}
