/* A program as NCCL's users write it: compiled against NVIDIA's own nccl.h (2.28.9, from the CUDA toolkit) and
 * linked against DCCL's libnccl.so.2. Two ranks in two threads create communicators with ncclConfig_t structs of
 * each size callers of NCCL 2.27-2.30 pass (72, 80, 88 and 96 bytes), and run the collectives and send/recv on host
 * buffers, every element checked. It passes only if the names, types, values and struct layouts of NVIDIA's
 * header mean the same to DCCL. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define N 1000
#define NRANKS 2

static ncclUniqueId id;
static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void check(int ok, int rank, size_t size, const char *what, ncclComm_t comm) {
  if (ok) return;
  pthread_mutex_lock(&lock);
  printf("FAIL: rank %d, %zu-byte config: %s (%s)\n", rank, size, what, ncclGetLastError(comm));
  failures++;
  pthread_mutex_unlock(&lock);
}

struct rank_args {
  int rank;
  size_t size;      /* the config's size field: what a caller built against another version passes */
  unsigned version; /* its NCCL_VERSION_CODE */
};

static void *run_rank(void *p) {
  const struct rank_args *a = p;
  int r = a->rank;
  /* The caller's struct, followed by bytes it does not own (junk DCCL must not read). */
  union {
    ncclConfig_t cfg;
    unsigned char bytes[128];
  } caller;
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  memset(caller.bytes, 0x5a, sizeof caller.bytes);
  memcpy(caller.bytes, &init, a->size < sizeof init ? a->size : sizeof init);
  caller.cfg.size = a->size;
  caller.cfg.version = a->version;
  caller.cfg.blocking = 1;
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRankConfig(&comm, NRANKS, id, r, &caller.cfg);
  check(res == ncclSuccess, r, a->size, "ncclCommInitRankConfig", NULL);
  if (res != ncclSuccess) return NULL;
  int count = 0, rank = -1;
  check(ncclCommCount(comm, &count) == ncclSuccess && count == NRANKS, r, a->size, "ncclCommCount", comm);
  check(ncclCommUserRank(comm, &rank) == ncclSuccess && rank == r, r, a->size, "ncclCommUserRank", comm);

  static float in[NRANKS][NRANKS * N], out[NRANKS][NRANKS * N];
  for (int i = 0; i < NRANKS * N; i++) in[r][i] = (float)(r + 1) * (float)(i % 7);
  int ok = ncclAllReduce(in[r], out[r], N, ncclFloat, ncclSum, comm, NULL) == ncclSuccess;
  for (int i = 0; i < N && ok; i++) ok = out[r][i] == 3.0f * (float)(i % 7);
  check(ok, r, a->size, "ncclAllReduce float sum", comm);
  ok = ncclBroadcast(in[r], out[r], N, ncclFloat, 1, comm, NULL) == ncclSuccess;
  for (int i = 0; i < N && ok; i++) ok = out[r][i] == 2.0f * (float)(i % 7);
  check(ok, r, a->size, "ncclBroadcast from rank 1", comm);
  ok = ncclAllGather(in[r], out[r], N, ncclFloat, comm, NULL) == ncclSuccess;
  for (int i = 0; i < NRANKS * N && ok; i++) ok = out[r][i] == (float)(i / N + 1) * (float)(i % N % 7);
  check(ok, r, a->size, "ncclAllGather", comm);
  ok = ncclReduceScatter(in[r], out[r], N, ncclFloat, ncclMax, comm, NULL) == ncclSuccess;
  for (int i = 0; i < N && ok; i++) ok = out[r][i] == 2.0f * (float)((r * N + i) % 7);
  check(ok, r, a->size, "ncclReduceScatter float max", comm);
  int peer = 1 - r;
  ok = ncclGroupStart() == ncclSuccess && ncclSend(in[r], N, ncclFloat, peer, comm, NULL) == ncclSuccess &&
       ncclRecv(out[r], N, ncclFloat, peer, comm, NULL) == ncclSuccess && ncclGroupEnd() == ncclSuccess;
  for (int i = 0; i < N && ok; i++) ok = out[r][i] == (float)(peer + 1) * (float)(i % 7);
  check(ok, r, a->size, "ncclSend/ncclRecv in a group", comm);
  check(ncclCommFinalize(comm) == ncclSuccess, r, a->size, "ncclCommFinalize", comm);
  check(ncclCommDestroy(comm) == ncclSuccess, r, a->size, "ncclCommDestroy", NULL);
  return NULL;
}

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    printf("FAIL: ncclGetVersion gives %d, the header says %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  const struct {
    size_t size;
    unsigned version;
  } callers[] = {{72, 22705}, {80, 22809}, {88, 22903}, {96, 23001}};
  for (int c = 0; c < 4; c++) {
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      printf("FAIL: ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
      return 1;
    }
    pthread_t t[NRANKS];
    struct rank_args args[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
      args[r] = (struct rank_args){r, callers[c].size, callers[c].version};
      pthread_create(&t[r], NULL, run_rank, &args[r]);
    }
    for (int r = 0; r < NRANKS; r++) pthread_join(t[r], NULL);
    printf("%s: %zu-byte configs (NCCL %u's): collectives on host buffers\n", failures ? "FAIL" : "ok",
           callers[c].size, callers[c].version);
  }
  printf("nvidia_header_program: %s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
