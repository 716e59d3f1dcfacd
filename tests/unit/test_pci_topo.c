/* The NIC nearest a GPU or this process's CPUs (src/topo/pci_topo.c), on a described machine
 * (tests/unit/data/two_sockets_gpus_nics.xml, loaded through HWLOC_XMLFILE): two packages, each with one CPU and a
 * PCIe switch holding a GPU and an InfiniBand NIC (0000:19:00.0 + 0000:1a:00.0; 0000:99:00.0 + 0000:9a:00.0), and
 * on package 0 an Ethernet NIC (0000:05:00.0) straight under the host bridge. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "topo/pci_topo.h"
#include "unit_check.h"

#ifndef DCCL_UNIT_DATA_DIR
#define DCCL_UNIT_DATA_DIR "tests/unit/data"
#endif

static int on_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

int main(void) {
#ifndef DCCL_HAVE_HWLOC
  printf("test_pci_topo: built without hwloc\n");
  return 77;
#endif
  setenv("HWLOC_XMLFILE", DCCL_UNIT_DATA_DIR "/two_sockets_gpus_nics.xml", 1);
  const char *nics[] = {"0000:9a:00.0", "0000:05:00.0", "0000:1a:00.0"};
  int hops[3];
  check(dccl_pci_nearest("0000:19:00.0", nics, 3, hops) == 2, "GPU 19: the NIC on its own switch (index 2)");
  check(hops[2] == 2 && hops[1] == 3 && hops[0] == 8, "GPU 19: hops 2 (same switch), 3 (same host bridge), 8 "
        "(the other package): got %d %d %d", hops[2], hops[1], hops[0]);
  check(dccl_pci_nearest("0000:99:00.0", nics, 3, hops) == 0, "GPU 99: the NIC on its own switch (index 0)");
  const char *eth_first[] = {"0000:05:00.0", "0000:9a:00.0"};
  check(dccl_pci_nearest("0000:19:00.0", eth_first, 2, hops) == 0, "GPU 19 without its switch's NIC: the one on "
        "its package beats the other package's");
  const char *unknown[] = {NULL, "0000:42:00.0", "0000:9a:00.0"};
  check(dccl_pci_nearest("0000:19:00.0", unknown, 3, hops) == 2 && hops[0] == -1 && hops[1] == -1,
        "candidates without a bus id or not in the tree lose");
  check(dccl_pci_nearest("0000:77:00.0", nics, 3, hops) == -1, "an anchor not in the tree: no choice");
  const char *same[] = {"0000:1a:00.0", "0000:1a:00.0"};
  check(dccl_pci_nearest("0000:19:00.0", same, 2, hops) == 0, "a tie (two ports of one NIC): the first");
  /* No GPU: the NIC nearest the CPUs the process may run on. */
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2 && on_cpu(1)) {
    check(dccl_pci_nearest(NULL, nics, 3, hops) == 0, "bound to CPU 1 (package 1): its switch's NIC");
    check(on_cpu(0) && dccl_pci_nearest(NULL, nics, 3, hops) == 1,
          "bound to CPU 0 (package 0): the NIC under its host bridge (%d hops) before the one behind its switch "
          "(%d)", hops[1], hops[2]);
  } else {
    printf("(one CPU here: the CPU-bound cases need two)\n");
  }
  printf("test_pci_topo: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
