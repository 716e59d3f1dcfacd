/* What the machine offers the ranks: processing units and NUMA nodes (hwloc when built with it). */
#ifndef DCCL_CPU_TOPO_H_
#define DCCL_CPU_TOPO_H_

struct dccl_cpu_topo {
  int pus;        /* processing units this process may run on (its allowed cpuset, e.g. a container's) */
  int numa_nodes; /* 1 without hwloc */
};

/* Read once per process. */
void dccl_cpu_topo_read(struct dccl_cpu_topo *out);

#endif
