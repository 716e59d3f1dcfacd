/* net_ib shares one verbs context, protection domain and proxy thread among all communicators of a process.
 * 16 communicators (8 jobs of 2 ranks, ncclCommInitAll) over RDMA loopback on the VM's rxe0:
 *   - while they live, the process owns 1 PD (`rdma resource show pd`, rows of this pid) and runs 1 proxy thread
 *     (/proc/self/task/TID/comm = dccl-proxy), and all-reduces on all 16 are correct;
 *   - a failure of one job (its receiver QP moved to the error state, then ncclCommAbort) leaves the other jobs'
 *     all-reduces correct;
 *   - a forked child may not use or free the parent's communicators, makes its own context for its own
 *     communicators, and the parent's still work after the child is gone;
 *   - after the last destroy the PD and the proxy thread are gone.
 * Needs an RDMA device (the soft-RoCE VM: scripts/roce-vm.sh). */
#include <dirent.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/comm.h"
#include "dccl.h"
#include "proxy/proxy.h"
#include "tests/unit/unit_check.h"
#include "transports/net_ib/ib_private.h"

#define NJOBS 8 /* of 2 ranks: 16 communicators */
#define COUNT 5000

/* Threads of this process, and those named like the proxy. */
static void count_threads(int *all, int *proxies) {
  *all = *proxies = 0;
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    (*all)++;
    char path[300], name[32] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(name, sizeof(name), f)) *proxies += !strncmp(name, DCCL_PROXY_THREAD_NAME, strlen(DCCL_PROXY_THREAD_NAME));
    if (f) fclose(f);
  }
  if (d) closedir(d);
}

/* PDs of this process, from `rdma resource show pd`: rows naming our pid, or rows of a user context that name no
 * pid (this kernel shows "dev rxe0 pdn 1 local_dma_lkey 0x0 users 192 ctxn 1" for them; in the VM nothing else
 * uses rxe0). The kernel's own PD ("comm [ib_core]") is always listed; -1 when the tool gave nothing. */
static int my_pds(void) {
  FILE *p = popen("rdma resource show pd 2>/dev/null", "r");
  if (!p) return -1;
  char line[512], mine[32];
  snprintf(mine, sizeof(mine), "pid %d ", (int)getpid());
  int rows = 0, n = 0;
  while (fgets(line, sizeof(line), p)) {
    rows++;
    n += strstr(line, mine) != NULL || (!strstr(line, "pid ") && strstr(line, "ctxn ") != NULL);
  }
  pclose(p);
  return rows ? n : -1;
}

static void report(const char *when, int threads0) {
  int threads, proxies;
  count_threads(&threads, &proxies);
  printf("  %-34s threads %d (%+d), proxy threads %d, PDs of this pid %d, net_ib contexts %d\n", when, threads,
         threads - threads0, proxies, my_pds(), dccl_ib_ctx_count());
}

/* One all-reduce on every job in `jobs` (NULL entries skipped), from this thread in one group; each rank adds
 * its rank + 1 + job, so every element must be 3 + 2 * job. Returns the group's result. */
static ncclResult_t allreduce_jobs(ncclComm_t jobs[][2], int first, int n, float *buf) {
  ncclGroupStart();
  for (int j = first; j < first + n; j++)
    for (int r = 0; r < 2; r++) {
      float *b = buf + (size_t)(j * 2 + r) * COUNT;
      for (int i = 0; i < COUNT; i++) b[i] = (float)(r + 1 + j);
      ncclAllReduce(b, b, COUNT, ncclFloat, ncclSum, jobs[j][r], NULL);
    }
  return ncclGroupEnd();
}

static int results_ok(int first, int n, const float *buf) {
  for (int j = first; j < first + n; j++)
    for (int r = 0; r < 2; r++)
      for (int i = 0; i < COUNT; i++)
        if (buf[(size_t)(j * 2 + r) * COUNT + i] != (float)(3 + 2 * j)) return 0;
  return 1;
}

static struct dccl_ib_link *recv_link(ncclComm_t comm) {
  struct dccl_conn *c = dccl_comm_find_conn(comm, 1 - comm->rank, 0, 0);
  return c && !strcmp(c->transport->name, "net_ib") ? c->priv : NULL;
}

/* The child: the parent's communicators are refused, its own get a context of their own. */
static int child(ncclComm_t jobs[][2], float *buf) {
  int bad = 0;
  if (ncclCommDestroy(jobs[2][0]) != ncclInvalidUsage) bad |= 1;
  if (dccl_ib_ctx_count() != 0) bad |= 2; /* the parent's was forgotten, not inherited */
  ncclComm_t own[1][2];
  if (ncclCommInitAll(own[0], 2, NULL) != ncclSuccess) return 4;
  if (dccl_ib_ctx_count() != 1) bad |= 8;
  if (allreduce_jobs(own, 0, 1, buf) != ncclSuccess || !results_ok(0, 1, buf)) bad |= 16;
  for (int r = 0; r < 2; r++) ncclCommDestroy(own[0][r]);
  if (dccl_ib_ctx_count() != 0) bad |= 32;
  return bad;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  setenv("DCCL_TRANSPORT", "ib", 1);
  if (!getenv("DCCL_ROCE_VM") && !getenv("DCCL_IB_HCA")) printf("note: expects an RDMA device (scripts/roce-vm.sh)\n");
  float *buf = malloc(sizeof(float) * COUNT * 2 * NJOBS);
  int threads0, proxies0;
  count_threads(&threads0, &proxies0);
  report("before", threads0);
  check(proxies0 == 0 && my_pds() == 0, "a proxy thread or PD exists before any communicator");

  ncclComm_t jobs[NJOBS][2];
  for (int j = 0; j < NJOBS; j++)
    if (ncclCommInitAll(jobs[j], 2, NULL) != ncclSuccess) {
      printf("FAIL: ncclCommInitAll of job %d: %s\n", j, ncclGetLastError(NULL));
      return 1;
    }
  int threads, proxies;
  count_threads(&threads, &proxies);
  report("16 communicators", threads0);
  check(proxies == 1, "16 communicators run %d proxy threads, want 1", proxies);
  check(my_pds() == 1, "16 communicators own %d PDs, want 1", my_pds());
  fflush(stdout);
  if (system("rdma resource show pd") != 0) printf("  (rdma resource show pd failed)\n"); /* for the log */
  check(dccl_ib_ctx_count() == 1, "%d net_ib contexts, want 1", dccl_ib_ctx_count());
  for (int j = 0; j < NJOBS; j++)
    check(recv_link(jobs[j][0]) && recv_link(jobs[j][0])->ic == recv_link(jobs[0][0])->ic,
          "job %d's links are not net_ib links of the shared context", j);
  ncclResult_t res = allreduce_jobs(jobs, 0, NJOBS, buf);
  check(res == ncclSuccess && results_ok(0, NJOBS, buf), "all-reduce on all 16: %d %s", (int)res,
        ncclGetLastError(NULL));

  /* Job 0 breaks: its rank 1 stops receiving. Its all-reduce fails; the others' pass. */
  struct dccl_ib_link *victim = recv_link(jobs[0][1]);
  struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
  for (int i = 0; victim && i < victim->nqps; i++) ibv_modify_qp(victim->qps[i].qp, &err, IBV_QP_STATE);
  res = allreduce_jobs(jobs, 0, 1, buf);
  printf("  job 0 with a broken QP: %d %s\n", (int)res, ncclGetLastError(NULL));
  check(res != ncclSuccess, "job 0's all-reduce over a QP in the error state succeeded");
  for (int r = 0; r < 2; r++) check(ncclCommAbort(jobs[0][r]) == ncclSuccess, "abort job 0");
  res = allreduce_jobs(jobs, 1, NJOBS - 1, buf);
  check(res == ncclSuccess && results_ok(1, NJOBS - 1, buf), "the other 14 after job 0 failed: %d %s", (int)res,
        ncclGetLastError(NULL));
  report("job 0 aborted", threads0);

  pid_t pid = fork();
  if (pid == 0) _exit(child(jobs, buf));
  int status = 0;
  waitpid(pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "forked child: status %#x (1: a parent's communicator was not refused, 2: the parent's context was seen, "
        "4/8/16/32: its own communicators or context failed)",
        WIFEXITED(status) ? WEXITSTATUS(status) : status);
  res = allreduce_jobs(jobs, 1, NJOBS - 1, buf);
  check(res == ncclSuccess && results_ok(1, NJOBS - 1, buf), "the parent's 14 after the child: %d %s", (int)res,
        ncclGetLastError(NULL));

  for (int j = 1; j < NJOBS; j++)
    for (int r = 0; r < 2; r++) check(ncclCommDestroy(jobs[j][r]) == ncclSuccess, "destroy job %d", j);
  count_threads(&threads, &proxies);
  report("after destroying all", threads0);
  check(proxies == 0 && my_pds() == 0 && dccl_ib_ctx_count() == 0,
        "after the last communicator: %d proxy threads, %d PDs, %d contexts", proxies, my_pds(), dccl_ib_ctx_count());
  free(buf);
  printf("ib_shared_ctx: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
