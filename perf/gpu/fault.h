/* gpu_mps_fault: what the other clients of a GPU see when one client faults or is killed while all of them run
 * kernels spinning on a flag in shared memory. A coordinator that never touches CUDA starts the clients, tells
 * them what to do over socket pairs and prints what each reports. */
#ifndef DCCL_PERF_GPU_FAULT_H_
#define DCCL_PERF_GPU_FAULT_H_

#include <stdint.h>

enum fault_role { ROLE_OWNER, ROLE_SURVIVOR, ROLE_VICTIM, ROLE_PROBE };

/* Commands to a client; each is answered with one int32 (1 = done as asked, 0 = something failed). */
enum fault_cmd {
  CMD_SHARE,    /* owner: export the flag region to the coordinator; others: receive and map it */
  CMD_SPIN,     /* launch the spinning kernel on the shared flag, answer once it runs */
  CMD_SPIN_OWN, /* the same on a flag in the client's own memory (no access to the shared region) */
  CMD_FAULT,    /* victim: run a kernel that stores to an illegal address */
  CMD_OBSERVE,  /* survivors: is the kernel still running, what does the stream say */
  CMD_RELEASE,  /* owner sets the shared flag from the host; all set their stop word; wait for the kernel */
  CMD_CONTINUE, /* allocate, launch, copy: can this client still work */
  CMD_EXIT,
};

/* Runs a client until CMD_EXIT (never returns). A probe runs alone: it opens the GPU and does a little work,
 * printing each step, so a step that hangs is visible. */
void fault_client(enum fault_role role, const char *name, int sock);

#endif
