/* Item 1 of the measurements: what each kind of IPC allows and what opening it costs. A exports, B opens. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gpu_common.h"
#include "pair.h"
#include "unix_msg.h"

#define OPEN_REPS 20

static void print_device_attr(CUdevice dev, CUdevice_attribute a, const char *name) {
  int v = -1;
  CUresult e = cuDeviceGetAttribute(&v, a, dev);
  printf("attribute %s = %d%s%s\n", name, v, e ? " " : "", e ? cu_name(e) : "");
}

static void print_pointer_attrs(CUdeviceptr ptr, const char *what) {
  int legacy = -1;
  unsigned long long types = 0;
  CUresult e1 = cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr);
  CUresult e2 = cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, ptr);
  CUipcMemHandle h;
  CUresult e3 = cuIpcGetMemHandle(&h, ptr);
  CUmemGenericAllocationHandle gh;
  CUresult e4 = cuMemRetainAllocationHandle(&gh, (void *)ptr);
  if (e4 == CUDA_SUCCESS) cuMemRelease(gh);
  printf(
      "pointer %s: IS_LEGACY_CUDA_IPC_CAPABLE %d (%s), ALLOWED_HANDLE_TYPES 0x%llx (%s), cuIpcGetMemHandle %s, "
      "cuMemRetainAllocationHandle %s\n",
      what, legacy, cu_name(e1), types, cu_name(e2), cu_name(e3), cu_name(e4));
}

void measure_attributes(struct pair *p) {
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "VIRTUAL_MEMORY_MANAGEMENT");
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, "HANDLE_TYPE_POSIX_FD");
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, "CAN_USE_64_BIT_STREAM_MEM_OPS");
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, "CAN_USE_STREAM_WAIT_VALUE_NOR");
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, "IPC_EVENT_SUPPORTED");
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "MEMORY_POOLS_SUPPORTED");
  print_device_attr(p->dev, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, "MPS_ENABLED");
  struct region plain, fd;
  CU_MUST(region_alloc(&plain, REGION_LEGACY, 1 << 20, p->dev));
  CU_MUST(region_alloc(&fd, REGION_POSIX_FD, 1 << 20, p->dev));
  print_pointer_attrs(plain.ptr, "cuMemAlloc");
  print_pointer_attrs(fd.ptr, "cuMemCreate(POSIX_FD)");
  CUdeviceptr pooled = 0;
  CUresult e = cuMemAllocAsync(&pooled, 1 << 20, 0);
  if (e == CUDA_SUCCESS && (e = cuStreamSynchronize(0)) == CUDA_SUCCESS) {
    print_pointer_attrs(pooled, "cuMemAllocAsync(default pool)");
    cuMemFreeAsync(pooled, 0);
    cuStreamSynchronize(0);
  } else {
    printf("pointer cuMemAllocAsync: %s\n", cu_name(e));
  }
  region_free(&plain);
  region_free(&fd);
}

/* B opens what A sent OPEN_REPS times, timing each open and close. */
static void open_repeatedly(struct pair *p, const struct region_wire *w, int fd) {
  double open_us[OPEN_REPS], close_us[OPEN_REPS], import_us[OPEN_REPS], map_us[OPEN_REPS], access_us[OPEN_REPS],
      reserve_us[OPEN_REPS];
  double first = 0;
  int ok = 0;
  for (int r = 0; r < OPEN_REPS; r++) {
    struct mapping m;
    struct open_cost c;
    double closing = 0;
    CUresult e = mapping_open(&m, w, fd, p->dev, &c);
    if (e != CUDA_SUCCESS) {
      printf("  B: open of %zu MiB failed: %s\n", (size_t)(w->size >> 20), cu_name(e));
      return;
    }
    CU_MUST(mapping_close(&m, &closing));
    if (r == 0) { /* the first open may set up what later ones reuse: reported apart */
      first = c.total_us;
      continue;
    }
    open_us[ok] = c.total_us, import_us[ok] = c.import_us, reserve_us[ok] = c.reserve_us, map_us[ok] = c.map_us,
    access_us[ok] = c.access_us;
    close_us[ok++] = closing;
  }
  printf("  B: open %zu MiB: first %.1f us, median %.1f us of %d", (size_t)(w->size >> 20), first,
         median(open_us, (size_t)ok), ok);
  if (w->kind == REGION_POSIX_FD)
    printf(" (import %.1f, reserve %.1f, map %.1f, set access %.1f)", median(import_us, (size_t)ok),
           median(reserve_us, (size_t)ok), median(map_us, (size_t)ok), median(access_us, (size_t)ok));
  printf("; close median %.1f us\n", median(close_us, (size_t)ok));
}

/* The same allocation opened twice without closing (DCCL must never map one allocation twice: what happens?). */
static void open_twice(struct pair *p, const struct region_wire *w, int fd) {
  struct mapping a, b;
  struct open_cost c;
  CUresult e1 = mapping_open(&a, w, fd, p->dev, &c);
  CUresult e2 = mapping_open(&b, w, fd, p->dev, &c);
  printf("  B: open twice without closing: first %s, second %s, same address %s\n", cu_name(e1), cu_name(e2),
         e1 == CUDA_SUCCESS && e2 == CUDA_SUCCESS ? (a.base == b.base ? "yes" : "no") : "-");
  if (e2 == CUDA_SUCCESS) printf("  B: close of the second: %s\n", cu_name(mapping_close(&b, NULL)));
  if (e1 == CUDA_SUCCESS) printf("  B: close of the first: %s\n", cu_name(mapping_close(&a, NULL)));
}

/* A opens its own export. It must not be relied on; this records what the driver does. */
static void open_own(struct pair *p) {
  struct region r;
  struct region_wire w;
  struct mapping m;
  struct open_cost c;
  int fd = -1;
  CU_MUST(region_alloc(&r, p->kind, 2 << 20, p->dev));
  CU_MUST(region_export(&r, r.ptr, &w, &fd));
  CUresult e = mapping_open(&m, &w, fd, p->dev, &c);
  printf("A opens its own handle: %s", cu_name(e));
  if (e == CUDA_SUCCESS) {
    uint32_t seen = 0;
    CU_MUST(cuMemsetD32(m.ptr, 0xc0ffee, 1));
    CU_MUST(cuMemcpyDtoH(&seen, r.ptr, sizeof seen));
    printf(", at the allocation's own address: %s, writes through it %s", m.base == r.ptr ? "yes" : "no",
           seen == 0xc0ffee ? "seen through the original" : "not seen");
    printf(", close: %s", cu_name(mapping_close(&m, NULL)));
  }
  printf("\n");
  if (fd >= 0) close(fd);
  region_free(&r);
}

/* A legacy handle asked for an address inside an allocation names the allocation: B sees its first byte. */
static void legacy_offset_A(struct pair *p) {
  CUdeviceptr ptr;
  CU_MUST(cuMemAlloc(&ptr, 4 << 20));
  CU_MUST(cuMemsetD32(ptr, 0x11111111, (2 << 20) / 4));
  CU_MUST(cuMemsetD32(ptr + (2 << 20), 0x22222222, (2 << 20) / 4));
  CU_MUST(cuCtxSynchronize());
  CUipcMemHandle at_base, inside;
  CU_MUST(cuIpcGetMemHandle(&at_base, ptr));
  CUresult e = cuIpcGetMemHandle(&inside, ptr + (2 << 20));
  printf("legacy: cuIpcGetMemHandle(base + 2 MiB) %s, same handle as the base's: %s\n", cu_name(e),
         e == CUDA_SUCCESS ? (memcmp(&at_base, &inside, sizeof inside) ? "no" : "yes") : "-");
  struct region_wire w;
  memset(&w, 0, sizeof w);
  w.kind = REGION_LEGACY;
  w.size = 4 << 20;
  w.ipc = e == CUDA_SUCCESS ? inside : at_base;
  if (msg_send(p->sock, &w, sizeof w, -1) != 0 || msg_barrier(p->sock) != 0) printf("FAILED: B is gone\n");
  cuMemFree(ptr);
}

static void legacy_offset_B(struct pair *p) {
  struct region_wire w;
  struct mapping m;
  struct open_cost c;
  if (msg_recv(p->sock, &w, sizeof w, NULL) != 0) return;
  CUresult e = mapping_open(&m, &w, -1, p->dev, &c);
  uint32_t first = 0;
  if (e == CUDA_SUCCESS) {
    CU_MUST(cuMemcpyDtoH(&first, m.ptr, sizeof first));
    mapping_close(&m, NULL);
  }
  printf("  B: opened the handle of (base + 2 MiB): %s, first word at the opened address 0x%08x (%s)\n", cu_name(e),
         first, first == 0x11111111 ? "the base: the handle names the allocation" : "not the base");
  msg_barrier(p->sock);
}

void measure_open_costs(struct pair *p) {
  static const size_t sizes[] = {(size_t)2 << 20, (size_t)256 << 20, (size_t)1 << 30};
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    if (p->role == 0) {
      struct region r;
      struct region_wire w;
      int fd = -1;
      CU_MUST(region_alloc(&r, p->kind, sizes[i], p->dev));
      double t0 = now_us();
      CU_MUST(region_export(&r, r.ptr, &w, &fd));
      printf("A: export %zu MiB: %.1f us\n", sizes[i] >> 20, now_us() - t0);
      if (msg_send(p->sock, &w, sizeof w, fd) != 0) printf("FAILED: sending the handle\n");
      if (fd >= 0) close(fd);
      msg_barrier(p->sock); /* B is done with it */
      region_free(&r);
    } else {
      struct region_wire w;
      int fd = -1;
      if (msg_recv(p->sock, &w, sizeof w, &fd) != 0) {
        printf("  B: no handle came\n");
        return;
      }
      open_repeatedly(p, &w, fd);
      if (i == 0) open_twice(p, &w, fd);
      if (fd >= 0) close(fd);
      msg_barrier(p->sock);
    }
  }
  if (p->role == 0) open_own(p);
  if (p->kind == REGION_LEGACY) p->role == 0 ? legacy_offset_A(p) : legacy_offset_B(p);
  pair_barrier(p);
}
