/* ncclCommRegister / ncclCommDeregister: the user's promise that a range stays allocated until deregistered.
 * DCCL keeps the ranges per communicator; a transport that can read user memory in place (net_ib) asks
 * dccl_comm_is_registered (through its context's is_registered) before sending from it without a copy. Host
 * buffers need no registration otherwise. */
#include <stdlib.h>

#include "core/comm.h"
#include "util/error.h"

struct dccl_reg_handle {
  void *buff;
  size_t size;
  struct dccl_reg_handle *next;
};

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommRegister"));
  if (!handle || (!buff && size)) return dccl_error(ncclInvalidArgument, "ncclCommRegister: NULL argument");
  struct dccl_reg_handle *h = malloc(sizeof(*h));
  if (!h) return dccl_error(ncclSystemError, "out of memory");
  *h = (struct dccl_reg_handle){buff, size, NULL};
  pthread_mutex_lock(&comm->reg_lock);
  h->next = comm->regs;
  comm->regs = h;
  atomic_fetch_add(&comm->nregs, 1);
  pthread_mutex_unlock(&comm->reg_lock);
  *handle = h;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  DCCLCHECK(dccl_comm_check(comm, "ncclCommDeregister"));
  if (!handle) return dccl_error(ncclInvalidArgument, "ncclCommDeregister: handle is NULL");
  struct dccl_reg_handle *found = NULL;
  pthread_mutex_lock(&comm->reg_lock);
  for (struct dccl_reg_handle **p = &comm->regs; *p; p = &(*p)->next)
    if (*p == handle) {
      found = *p;
      *p = found->next;
      atomic_fetch_sub(&comm->nregs, 1);
      break;
    }
  pthread_mutex_unlock(&comm->reg_lock);
  if (!found)
    return dccl_error(ncclInvalidArgument, "ncclCommDeregister: %p is not a registration of this communicator", handle);
  free(found);
  return ncclSuccess;
}

int dccl_comm_is_registered(struct dccl_comm *comm, const void *ptr, uint64_t bytes) {
  if (atomic_load_explicit(&comm->nregs, memory_order_relaxed) == 0) return 0; /* asked on every send step */
  uintptr_t a = (uintptr_t)ptr;
  int hit = 0;
  pthread_mutex_lock(&comm->reg_lock);
  for (struct dccl_reg_handle *h = comm->regs; h && !hit; h = h->next)
    hit = a >= (uintptr_t)h->buff && a + bytes <= (uintptr_t)h->buff + h->size;
  pthread_mutex_unlock(&comm->reg_lock);
  return hit;
}

void dccl_comm_free_registrations(struct dccl_comm *comm) {
  while (comm->regs) {
    struct dccl_reg_handle *next = comm->regs->next;
    free(comm->regs);
    comm->regs = next;
  }
}
