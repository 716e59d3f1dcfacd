/* The set of live communicators, so a destroyed or made-up handle is refused without touching freed memory. */
#include "core/comm_registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/comm.h"
#include "util/error.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* getpid() is a system call, and every API call asks "am I the communicator's creator?": keep the answer, and
 * refresh it in a forked child. */
static pid_t self_pid;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;
static void self_pid_refresh(void) { self_pid = getpid(); }
static void self_pid_init(void) {
  self_pid_refresh();
  pthread_atfork(NULL, NULL, self_pid_refresh);
}
static pid_t current_pid(void) {
  pthread_once(&self_pid_once, self_pid_init);
  return self_pid;
}
static struct dccl_comm **live;
static int nlive, cap;

/* Every API call checks its handle: a mutex and a scan each time cost more than the rest of a small call. Each
 * thread remembers the last handle it found live and the registry's generation then; any add or remove bumps the
 * generation, so a destroyed handle is never taken for live (a fresh one at the same address is found by the scan). */
static _Atomic uint64_t generation = 1;
static __thread __attribute__((tls_model("initial-exec"))) const struct dccl_comm *checked_comm;
static __thread __attribute__((tls_model("initial-exec"))) uint64_t checked_generation;

ncclResult_t dccl_registry_add(struct dccl_comm *comm) {
  pthread_mutex_lock(&registry_lock);
  if (nlive == cap) {
    int ncap = cap ? cap * 2 : 16;
    struct dccl_comm **n = realloc(live, (size_t)ncap * sizeof(*n));
    if (!n) {
      pthread_mutex_unlock(&registry_lock);
      return dccl_error(ncclSystemError, "out of memory registering a communicator");
    }
    live = n;
    cap = ncap;
  }
  live[nlive++] = comm;
  atomic_fetch_add_explicit(&generation, 1, memory_order_release);
  pthread_mutex_unlock(&registry_lock);
  return ncclSuccess;
}

void dccl_registry_remove(struct dccl_comm *comm) {
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nlive; i++)
    if (live[i] == comm) {
      live[i] = live[--nlive];
      atomic_fetch_add_explicit(&generation, 1, memory_order_release);
      break;
    }
  pthread_mutex_unlock(&registry_lock);
}

int dccl_comm_is_live(const struct dccl_comm *comm) {
  uint64_t gen = atomic_load_explicit(&generation, memory_order_acquire);
  if (comm == checked_comm && gen == checked_generation) return 1;
  pthread_mutex_lock(&registry_lock);
  int found = 0;
  for (int i = 0; i < nlive && !found; i++) found = live[i] == comm;
  pthread_mutex_unlock(&registry_lock);
  /* gen was read before the scan: a change since then makes the next call scan again. */
  if (found) checked_comm = comm, checked_generation = gen;
  return found;
}

ncclResult_t dccl_comm_check(struct dccl_comm *comm, const char *call) {
  if (!comm) return dccl_error(ncclInvalidArgument, "%s: communicator is NULL", call);
  if (!dccl_comm_is_live(comm) || comm->magic != DCCL_COMM_MAGIC)
    return dccl_error(ncclInvalidArgument, "%s: %p is not a live communicator (destroyed, or never created)", call,
                      (void *)comm);
  if (comm->creator_pid != current_pid())
    return dccl_error(ncclInvalidUsage,
                      "%s: this communicator was created by process %d before fork(); a forked child must create "
                      "its own communicators",
                      call, (int)comm->creator_pid);
  return ncclSuccess;
}
