// FIFOs between two kernels in two processes on one GPU, through memory shared as a cuMem POSIX file descriptor
// (cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; the descriptor passed over a Unix socket with
// SCM_RIGHTS; cuMemImportFromShareableHandle, cuMemMap, cuMemSetAccess). Kernel to kernel, each counter lives in
// its poller's device memory: tail and slots in the receiver's allocation, head in the sender's. Each process maps
// its own allocation and the peer's; the descriptor holds offsets, and each process resolves them against its own
// mappings. Run under MPS (scripts/gpu-lab.sh starts it): without it the two contexts take turns in time slices.
//   1. 10^6 slots A -> B of each protocol over CONN_IPC_FIFOS FIFOs (one CTA each), every byte checked in B.
//   2. Ping-pong of one 8-byte slot A -> B -> A, each protocol: the round trip.
// Exit codes: 0 all passed, 1 a failure, 77 no usable GPU (cannot run, not a pass).
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "conn_device.cuh"

#define CONN_IPC_FIFOS 4
#define CONN_IPC_SLOTS 1000000ull
#define CONN_PING_ROUNDS 100000ull
#define CONN_PING_WARM 1000ull
// FIFO i from A to B is link i; FIFO i from B to A is link CONN_IPC_FIFOS + i. In each process's allocation: the
// receive regions of the links it receives on, at RECV_OFF(link), then the sender head lines, at HEAD_OFF(link).
#define NLINKS (2 * CONN_IPC_FIFOS)

static const char *who = "A";

// The driver's cuMem calls, reached through the runtime (no link to libcuda: the program loads without a driver
// and says so with exit code 77).
static struct {
  PFN_cuGetErrorString_v6000 GetErrorString;
  PFN_cuMemGetAllocationGranularity_v10020 MemGetAllocationGranularity;
  PFN_cuMemCreate_v10020 MemCreate;
  PFN_cuMemExportToShareableHandle_v10020 MemExportToShareableHandle;
  PFN_cuMemImportFromShareableHandle_v10020 MemImportFromShareableHandle;
  PFN_cuMemAddressReserve_v10020 MemAddressReserve;
  PFN_cuMemMap_v10020 MemMap;
  PFN_cuMemSetAccess_v10020 MemSetAccess;
} cu;

static bool load_driver() {
  struct {
    const char *name;
    void **fn;
  } want[] = {{"cuGetErrorString", (void **)&cu.GetErrorString},
              {"cuMemGetAllocationGranularity", (void **)&cu.MemGetAllocationGranularity},
              {"cuMemCreate", (void **)&cu.MemCreate},
              {"cuMemExportToShareableHandle", (void **)&cu.MemExportToShareableHandle},
              {"cuMemImportFromShareableHandle", (void **)&cu.MemImportFromShareableHandle},
              {"cuMemAddressReserve", (void **)&cu.MemAddressReserve},
              {"cuMemMap", (void **)&cu.MemMap},
              {"cuMemSetAccess", (void **)&cu.MemSetAccess}};
  for (auto &w : want) {
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(w.name, w.fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      printf("FAIL (%s): the driver has no %s\n", who, w.name);
      return false;
    }
  }
  return true;
}

#define CU_OK(call)                                                                 \
  do {                                                                              \
    CUresult err_ = (call);                                                         \
    if (err_ != CUDA_SUCCESS) {                                                     \
      const char *s_ = "?";                                                         \
      cu.GetErrorString(err_, &s_);                                                  \
      printf("FAIL (%s): %s: %s (%s:%d)\n", who, #call, s_, __FILE__, __LINE__);    \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)
#define CUDA_OK(call)                                                                                \
  do {                                                                                               \
    cudaError_t err_ = (call);                                                                       \
    if (err_ != cudaSuccess) {                                                                       \
      printf("FAIL (%s): %s: %s (%s:%d)\n", who, #call, cudaGetErrorString(err_), __FILE__, __LINE__); \
      exit(1);                                                                                       \
    }                                                                                                \
  } while (0)

static void send_fd(int sock, int fd) {
  char byte = 0, ctrl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr m;
  memset(&m, 0, sizeof(m));
  memset(ctrl, 0, sizeof(ctrl));
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof(ctrl);
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(sock, &m, 0) != 1) {
    printf("FAIL (%s): sendmsg of the memory's descriptor\n", who);
    exit(1);
  }
}

static int recv_fd(int sock) {
  char byte, ctrl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr m;
  memset(&m, 0, sizeof(m));
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof(ctrl);
  struct cmsghdr *c = recvmsg(sock, &m, 0) == 1 ? CMSG_FIRSTHDR(&m) : nullptr;
  if (!c || c->cmsg_type != SCM_RIGHTS) {
    printf("FAIL (%s): no descriptor arrived from the peer\n", who);
    exit(1);
  }
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

// Both processes reach this point before either goes on.
static void barrier(int sock) {
  char b = 1;
  if (write(sock, &b, 1) != 1 || read(sock, &b, 1) != 1) {
    printf("FAIL (%s): the peer process is gone\n", who);
    exit(1);
  }
}

static CUdeviceptr map_handle(CUmemGenericAllocationHandle h, size_t bytes, CUdevice dev) {
  CUdeviceptr p;
  CU_OK(cu.MemAddressReserve(&p, bytes, 0, 0, 0));
  CU_OK(cu.MemMap(p, bytes, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU_OK(cu.MemSetAccess(p, bytes, &acc, 1));
  return p;
}

static const char *proto_name(int proto) { return proto == DCCL_PROTO_LL ? "LL" : "bulk"; }

int main() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  pid_t child = fork();  // before any CUDA call: each process makes its own context
  int is_a = child != 0, sock = is_a ? sv[0] : sv[1];
  close(is_a ? sv[1] : sv[0]);
  who = is_a ? "A" : "B";
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    if (is_a) printf("no usable GPU\n");
    if (is_a) waitpid(child, nullptr, 0);
    return 77;
  }
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(0));
  if (!load_driver()) return 1;
  CUdevice dev = 0;  // the ordinal is the handle

  // One allocation per process: the receive regions of its incoming links, then the head lines of its outgoing.
  struct dccl_conn_desc desc;
  uint64_t recv_bytes = dccl_conn_desc_layout(&desc, CONN_NSLOTS, CONN_BULK_BYTES, DCCL_LL_MAX_BYTES, DCCL_REGION_SEND);
  recv_bytes = (recv_bytes + 4095) & ~4095ull;
  uint64_t heads_off = CONN_IPC_FIFOS * recv_bytes;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU_OK(cu.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t bytes = (heads_off + CONN_IPC_FIFOS * DCCL_CACHELINE + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle mine, theirs;
  CU_OK(cu.MemCreate(&mine, bytes, &prop, 0));
  int fd = -1;
  CU_OK(cu.MemExportToShareableHandle(&fd, mine, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  if (is_a) {
    send_fd(sock, fd);
    fd = recv_fd(sock);
  } else {
    int peer_fd = recv_fd(sock);
    send_fd(sock, fd);
    fd = peer_fd;
  }
  CU_OK(cu.MemImportFromShareableHandle(&theirs, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  char *my_base = (char *)map_handle(mine, bytes, dev), *peer_base = (char *)map_handle(theirs, bytes, dev);

  // This process's view of each link it sends on (out) and receives on (in): the receiver's region holds tail and
  // slots, the sender's holds head.
  dev_link out[CONN_IPC_FIFOS], in[CONN_IPC_FIFOS];
  for (int i = 0; i < CONN_IPC_FIFOS; i++) {
    out[i].desc = in[i].desc = desc;
    out[i].regions[DCCL_REGION_RECV] = peer_base + i * recv_bytes;
    out[i].regions[DCCL_REGION_SEND] = my_base + heads_off + i * DCCL_CACHELINE;
    in[i].regions[DCCL_REGION_RECV] = my_base + i * recv_bytes;
    in[i].regions[DCCL_REGION_SEND] = peer_base + heads_off + i * DCCL_CACHELINE;
  }
  dev_link *d_out, *d_in;
  dev_result *res;
  CUDA_OK(cudaMalloc(&d_out, sizeof(out)));
  CUDA_OK(cudaMalloc(&d_in, sizeof(in)));
  CUDA_OK(cudaMalloc(&res, sizeof(dev_result)));
  CUDA_OK(cudaMemcpy(d_out, out, sizeof(out), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_in, in, sizeof(in), cudaMemcpyHostToDevice));

  int failed = 0;
  for (int test = 0; test < 4; test++) {
    int proto = test % 2 ? DCCL_PROTO_LL : DCCL_PROTO_BULK, ping = test >= 2;
    uint32_t slot = ping ? 8 : proto == DCCL_PROTO_LL ? CONN_LL_BYTES : CONN_BULK_BYTES;
    // Fresh FIFOs: each process clears its own allocation (counters, flags), then both start.
    dev_result init = {0, 0, ~0ull, 0};
    CUDA_OK(cudaMemset(my_base, 0, bytes));
    CUDA_OK(cudaMemcpy(res, &init, sizeof(init), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    barrier(sock);
    uint64_t n = ping ? CONN_PING_ROUNDS : CONN_IPC_SLOTS / CONN_IPC_FIFOS;
    if (ping)
      k_pingpong<<<1, CONN_THREADS>>>(d_out, d_in, is_a, n, CONN_PING_WARM, slot, proto, res);
    else
      k_stream<<<CONN_IPC_FIFOS, CONN_THREADS>>>(is_a ? d_out : d_in, is_a, n, slot, proto, res);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    dev_result r;
    CUDA_OK(cudaMemcpy(&r, res, sizeof(r), cudaMemcpyDeviceToHost));
    int ok = r.errors == 0 && !r.aborted;
    double s = (double)(r.t1_ns - r.t0_ns) / 1e9;
    if (ping && is_a)
      printf("%s: ping-pong kernel A -> kernel B -> kernel A (two processes, MPS), %s, 8 B: %.2f us per round "
             "trip (%llu timed of %llu; wrong %llu%s)\n",
             ok ? "ok" : "FAIL", proto_name(proto), s * 1e6 / (double)(n - CONN_PING_WARM), (unsigned long long)(n - CONN_PING_WARM),
             (unsigned long long)n,
             r.errors, r.aborted ? ", a spin gave up" : "");
    else if (!ping && !is_a)
      printf("%s: kernel A -> kernel B (two processes, MPS), %s: %llu slots of %u B over %d FIFOs (CTAs of %d "
             "threads), every byte checked in B: %.3f s, %.2f GB/s of payload, %.2f us per slot per FIFO (wrong "
             "%llu%s)\n",
             ok ? "ok" : "FAIL", proto_name(proto), (unsigned long long)(n * CONN_IPC_FIFOS), slot, CONN_IPC_FIFOS, CONN_THREADS, s,
             (double)n * CONN_IPC_FIFOS * slot / s / 1e9, s / (double)n * 1e6, r.errors,
             r.aborted ? ", a spin gave up" : "");
    else if (!ok)
      printf("FAIL (%s): test %d: wrong %llu%s\n", who, test, r.errors, r.aborted ? ", a spin gave up" : "");
    failed += !ok;
    barrier(sock);  // the peer is done with this process's memory before it is cleared again
  }
  if (!is_a) return failed ? 1 : 0;
  int status = 1;
  waitpid(child, &status, 0);
  int ok = !failed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("conn_ipc_test: %s\n", ok ? "all passed" : "FAILED");
  return ok ? 0 : 1;
}
