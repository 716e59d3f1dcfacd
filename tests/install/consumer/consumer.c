#include <stdio.h>

#include <dccl.h>

int main(void) {
  int version = 0;
  ncclComm_t comm;
  float in[3] = {1, 2, 3}, out[3] = {0};
  if (ncclGetVersion(&version) != ncclSuccess || ncclCommInitAll(&comm, 1, NULL) != ncclSuccess) return 1;
  if (ncclAllReduce(in, out, 3, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) return 1;
  ncclCommDestroy(comm);
  printf("version %d, result %g %g %g\n", version, out[0], out[1], out[2]);
  return (out[0] == 1 && out[1] == 2 && out[2] == 3) ? 0 : 1;
}
