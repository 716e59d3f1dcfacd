/* The share of a GPU's resident CTAs each launch may take (collectives/device/cta_share.h). */
#include "collectives/device/cta_share.h"

#define MAX_DEVICES 64
/* Rank kernels that may run at once on each GPU, in 1/UNIT: a communicator counts its ranks on the GPU, split
 * among its rank objects in this process (ncclCommInitAll puts several here). Each part is rounded up by less than
 * 1/UNIT, so the sum rounded to the nearest whole is exact below UNIT / 2 rank objects. */
#define UNIT 1024
static long load[MAX_DEVICES];

static int valid(int ordinal) {
  return ordinal >= 0 && ordinal < MAX_DEVICES;
}

long dccl_cta_share_join(int ordinal, int ranks_on_gpu, int local) {
  if (!valid(ordinal)) return 0;
  if (ranks_on_gpu < 1) ranks_on_gpu = 1;
  if (local < 1) local = 1;
  long joined = ((long)ranks_on_gpu * UNIT + local - 1) / local;
  __atomic_add_fetch(&load[ordinal], joined, __ATOMIC_RELAXED);
  return joined;
}

void dccl_cta_share_leave(int ordinal, long joined) {
  if (valid(ordinal)) __atomic_sub_fetch(&load[ordinal], joined, __ATOMIC_RELAXED);
}

int dccl_cta_share(int ordinal, int resident) {
  long l = valid(ordinal) ? __atomic_load_n(&load[ordinal], __ATOMIC_RELAXED) : 0;
  long kernels = (l + UNIT / 2) / UNIT;
  int share = kernels > 0 ? (int)(resident / kernels) : resident;
  return share > 0 ? share : 1;
}

double dccl_cta_share_load(int ordinal) {
  return valid(ordinal) ? (double)__atomic_load_n(&load[ordinal], __ATOMIC_RELAXED) / UNIT : 0;
}
