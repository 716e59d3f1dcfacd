/* libnccl.so.2 works as NCCL does for a program that loads it by name: it is loaded with dlopen (immediate
 * binding, as Python loads extension modules), and every function comes from it by name. Checks: the version is
 * NCCL 2.28.9's; each nccl* name and its pnccl* twin are one function; a one-rank communicator all-reduces host
 * buffers; the device API is refused with a reason; the team functions give their documented values.
 * Usage: test_nccl_dropin PATH/libnccl.so.2 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "dccl.h"

struct team {
  int nRanks, rank, stride;
};

static int failures;
static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    printf("FAIL: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  /* Each function by name from the library; the declared ones with dccl.h's types, the device API's by hand. */
#define GET(name) __typeof__(&name) f_##name = (__typeof__(&name))dlsym(lib, #name)
#define GET_AS(name, type) type f_##name = (type)dlsym(lib, #name)
  GET(ncclGetVersion);
  GET_AS(pncclGetVersion, __typeof__(&ncclGetVersion));
  GET(ncclCommInitAll);
  GET(ncclAllReduce);
  GET_AS(pncclAllReduce, void *);
  GET(ncclCommDestroy);
  GET(ncclGetLastError);
  GET(ncclResetDebugInit);
  typedef ncclResult_t (*dev_comm_create_fn)(ncclComm_t, const void *, void *);
  typedef struct team (*team_fn)(ncclComm_t);
  typedef int (*team_rank_fn)(ncclComm_t, struct team, int);
  typedef int (*calc_slots_fn)(int, int);
  typedef void (*reset_fn)(void);
  GET_AS(ncclDevCommCreate, dev_comm_create_fn);
  GET_AS(ncclTeamWorld, team_fn);
  GET_AS(ncclTeamLsa, team_fn);
  GET_AS(ncclTeamRankToWorld, team_rank_fn);
  GET_AS(ncclLLA2ACalcSlots, calc_slots_fn);
  GET_AS(ncclResetDebugInitInternal, reset_fn);
  if (!f_ncclGetVersion || !f_pncclGetVersion || !f_ncclCommInitAll || !f_ncclAllReduce || !f_pncclAllReduce ||
      !f_ncclCommDestroy || !f_ncclGetLastError || !f_ncclResetDebugInit || !f_ncclDevCommCreate ||
      !f_ncclTeamWorld || !f_ncclTeamLsa || !f_ncclTeamRankToWorld || !f_ncclLLA2ACalcSlots ||
      !f_ncclResetDebugInitInternal) {
    printf("FAIL: a name is missing from %s\n", argv[1]);
    return 1;
  }
  int v = 0, pv = 0;
  check(f_ncclGetVersion(&v) == ncclSuccess && v == 22809, "ncclGetVersion reports 22809 (NCCL 2.28.9)");
  check(f_pncclGetVersion(&pv) == ncclSuccess && pv == v, "pncclGetVersion is the same function");
  check((void *)f_ncclAllReduce == f_pncclAllReduce, "ncclAllReduce and pncclAllReduce have one address");

  ncclComm_t comm = NULL;
  int dev = -1; /* no GPU: a host-buffer communicator */
  check(f_ncclCommInitAll(&comm, 1, &dev) == ncclSuccess, "a one-rank communicator through libnccl.so.2");
  float in[5] = {1, 2, 3, 4, 5}, out[5] = {0};
  ncclResult_t r = f_ncclAllReduce(in, out, 5, ncclFloat32, ncclSum, comm, NULL);
  check(r == ncclSuccess && !memcmp(in, out, sizeof in), "ncclAllReduce of host buffers");

  r = f_ncclDevCommCreate(comm, NULL, NULL);
  const char *why = f_ncclGetLastError(comm);
  check(r == ncclInvalidUsage && why && strstr(why, "device API"), "ncclDevCommCreate is refused with a reason");
  struct team w = f_ncclTeamWorld(comm), l = f_ncclTeamLsa(comm);
  check(w.nRanks == 1 && w.rank == 0 && w.stride == 1, "ncclTeamWorld: every rank");
  check(l.nRanks == 1 && l.rank == 0, "ncclTeamLsa: this rank alone");
  check(f_ncclTeamRankToWorld(comm, w, 0) == 0 && f_ncclTeamRankToWorld(comm, w, 1) == -1, "ncclTeamRankToWorld");
  check(f_ncclLLA2ACalcSlots(1024, 8) == 0, "ncclLLA2ACalcSlots: no slots");
  f_ncclResetDebugInitInternal();
  check(f_ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  printf("test_nccl_dropin: %s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
