/* What the machine offers the ranks: the processing units this process may run on (hwloc when built with it and
 * the affinity mask alone cannot tell). */
#ifndef DCCL_CPU_TOPO_H_
#define DCCL_CPU_TOPO_H_

struct dccl_cpu_topo {
  int pus; /* processing units this process may run on (its allowed cpuset, e.g. a container's) */
};

/* Read once per process. */
void dccl_cpu_topo_read(struct dccl_cpu_topo *out);

#endif
