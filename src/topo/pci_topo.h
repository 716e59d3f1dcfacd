/* Which of several PCI devices (NICs) is nearest to another (the rank's GPU) or to this process's CPUs, from
 * hwloc's tree of the machine: packages, host bridges, PCIe switches, devices. */
#ifndef DCCL_PCI_TOPO_H_
#define DCCL_PCI_TOPO_H_

#include <stddef.h>

/* The index among `cands` (PCI bus ids "0000:1b:00.0"; NULL or unknown ones lose) of the one with the fewest hops
 * in the machine's tree to `anchor` (a bus id), or, with anchor NULL, to the smallest object holding the CPUs this
 * process may run on; ties go to the lowest index. hops[i] gets each candidate's count (-1: not in the tree).
 * Returns -1 when nothing can be told (no hwloc, no candidate in the tree, or an anchor not in it). Loads hwloc
 * with its I/O objects (some milliseconds): call it once, not per communicator. HWLOC_XMLFILE replaces the
 * machine with a description (the tests). */
int dccl_pci_nearest(const char *anchor, const char *const *cands, int n, int *hops);

#endif
