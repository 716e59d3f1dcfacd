#include "ipc_region.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_common.h"
#include "kernels.h"

const char *region_kind_name(enum region_kind kind) {
  return kind == REGION_LEGACY       ? "legacy IPC (cuMemAlloc + cuIpcGetMemHandle)"
         : kind == REGION_CUDAMALLOC ? "legacy IPC (cudaMalloc + cuIpcGetMemHandle)"
                                     : "cuMem POSIX fd";
}

int region_option(const char *flag, const char *value, enum region_kind *kind, size_t *mib, int *reps) {
  if (!strcmp(flag, "--kind")) {
    if (!strcmp(value, "legacy")) *kind = REGION_LEGACY;
    else if (!strcmp(value, "fd")) *kind = REGION_POSIX_FD;
    else if (!strcmp(value, "cudamalloc")) *kind = REGION_CUDAMALLOC;
    else return -1;
  } else if (!strcmp(flag, "--mib")) {
    *mib = strtoull(value, NULL, 10);
  } else if (!strcmp(flag, "--reps")) {
    *reps = atoi(value);
  } else {
    return 0;
  }
  return 1;
}

static CUmemAllocationProp fd_prop(CUdevice dev) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

static CUresult grant_access(CUdeviceptr ptr, size_t size, CUdevice dev) {
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = dev;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return cuMemSetAccess(ptr, size, &access, 1);
}

/* Reserves an address range, maps the allocation there and grants this device access; times each step into
 * us[0..2] when us is not NULL. Nothing is left reserved or mapped on failure. */
static CUresult reserve_and_map(CUmemGenericAllocationHandle h, size_t size, CUdevice dev, CUdeviceptr *ptr,
                                double *us) {
  double t0 = now_us();
  CUresult e = cuMemAddressReserve(ptr, size, 0, 0, 0);
  if (e != CUDA_SUCCESS) return e;
  double t1 = now_us();
  if ((e = cuMemMap(*ptr, size, 0, h, 0)) != CUDA_SUCCESS) goto unreserve;
  double t2 = now_us();
  e = grant_access(*ptr, size, dev);
  if (us) us[0] = t1 - t0, us[1] = t2 - t1, us[2] = now_us() - t2;
  if (e == CUDA_SUCCESS) return e;
  cuMemUnmap(*ptr, size);
unreserve:
  cuMemAddressFree(*ptr, size);
  *ptr = 0;
  return e;
}

CUresult region_alloc(struct region *r, enum region_kind kind, size_t size, CUdevice dev) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  if (kind == REGION_LEGACY) {
    r->size = size;
    return cuMemAlloc(&r->ptr, size);
  }
  if (kind == REGION_CUDAMALLOC) {
    r->size = size;
    return runtime_malloc(&r->ptr, size) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  }
  CUmemAllocationProp prop = fd_prop(dev);
  size_t gran = 0;
  CUresult e = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (e != CUDA_SUCCESS) return e;
  r->size = (size + gran - 1) / gran * gran;
  if ((e = cuMemCreate(&r->handle, r->size, &prop, 0)) != CUDA_SUCCESS) return e;
  if ((e = reserve_and_map(r->handle, r->size, dev, &r->ptr, NULL)) != CUDA_SUCCESS) cuMemRelease(r->handle);
  return e;
}

void region_free(struct region *r) {
  if (!r->ptr) return;
  if (r->kind == REGION_LEGACY) {
    cuMemFree(r->ptr);
  } else if (r->kind == REGION_CUDAMALLOC) {
    runtime_free(r->ptr);
  } else {
    cuMemUnmap(r->ptr, r->size);
    cuMemAddressFree(r->ptr, r->size);
    cuMemRelease(r->handle);
  }
  r->ptr = 0;
}

CUresult region_export(const struct region *r, CUdeviceptr at, struct region_wire *w, int *fd) {
  memset(w, 0, sizeof *w);
  w->kind = (int32_t)r->kind;
  *fd = -1;
  if (r->kind == REGION_POSIX_FD) {
    w->size = r->size;
    w->offset = at - r->ptr;
    return cuMemExportToShareableHandle(fd, r->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  }
  /* The handle names the allocation, not the address: the receiver needs the offset from the base. */
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult e = cuMemGetAddressRange(&base, &size, at);
  if (e != CUDA_SUCCESS) return e;
  w->size = size;
  w->offset = at - base;
  return cuIpcGetMemHandle(&w->ipc, base);
}

CUresult mapping_open(struct mapping *m, const struct region_wire *w, int fd, CUdevice dev, struct open_cost *cost) {
  memset(m, 0, sizeof *m);
  memset(cost, 0, sizeof *cost);
  m->kind = (enum region_kind)w->kind;
  m->size = w->size;
  double t0 = now_us();
  CUresult e;
  if (m->kind != REGION_POSIX_FD) {
    e = cuIpcOpenMemHandle(&m->base, w->ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    cost->total_us = now_us() - t0;
    if (e != CUDA_SUCCESS) return e;
    m->ptr = m->base + w->offset;
    return e;
  }
  e = cuMemImportFromShareableHandle(&m->handle, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  cost->import_us = now_us() - t0;
  if (e != CUDA_SUCCESS) return e;
  double us[3] = {0, 0, 0};
  e = reserve_and_map(m->handle, m->size, dev, &m->base, us);
  cost->reserve_us = us[0], cost->map_us = us[1], cost->access_us = us[2];
  cost->total_us = now_us() - t0;
  if (e != CUDA_SUCCESS) {
    cuMemRelease(m->handle);
    return e;
  }
  m->ptr = m->base + w->offset;
  return e;
}

CUresult mapping_close(struct mapping *m, double *us) {
  double t0 = now_us();
  CUresult e = CUDA_SUCCESS;
  if (m->base && m->kind != REGION_POSIX_FD) {
    e = cuIpcCloseMemHandle(m->base);
  } else if (m->base) {
    e = cuMemUnmap(m->base, m->size);
    CUresult e2 = cuMemAddressFree(m->base, m->size), e3 = cuMemRelease(m->handle);
    if (e == CUDA_SUCCESS) e = e2 != CUDA_SUCCESS ? e2 : e3;
  }
  m->base = m->ptr = 0;
  if (us) *us = now_us() - t0;
  return e;
}
