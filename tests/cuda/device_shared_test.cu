// The headers shared by host and device code (pure/) give the same bits on both: reduce_math.h (conversions and binary
// ops for every NCCL type) and schedule.h (ring/tree/chain schedules). A kernel runs them over test vectors and
// the host runs the same functions over the same vectors; every result is compared.
// Exit codes: 0 all passed, 1 a mismatch or CUDA error, 77 no usable GPU (cannot run, not a pass).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dccl.h"
#include "pure/reduce_math.h"
#include "pure/schedule.h"

static int n_passed, n_failed;

static void check(bool ok, const char *what) {
  if (ok) {
    n_passed++;
  } else {
    n_failed++;
    printf("FAIL: %s\n", what);
  }
}

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      printf("FAIL: %s: %s (%s:%d)\n", #call, cudaGetErrorString(err_), __FILE__, __LINE__); \
      return false;                                                                          \
    }                                                                                        \
  } while (0)

// A device copy of a host vector; freed by its owner.
template <typename T>
static T *to_device(const std::vector<T> &v) {
  T *d = nullptr;
  if (cudaMalloc(&d, v.size() * sizeof(T) + 1) != cudaSuccess) return nullptr;
  if (cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return nullptr;
  }
  return d;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rng() {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}

// ---- conversions -----------------------------------------------------------------------------------------

// For pattern i of each narrow format (all 65536 / 256 of them): its float bits, and that float narrowed again.
// For float input j: its fp16, bf16, e4m3 and e5m2 encodings.
struct conv_out {
  uint32_t widened[4];  // fp16, bf16, e4m3, e5m2 (pattern i, when it exists)
  uint32_t back[4];
};

__host__ __device__ static void convert_one(uint32_t i, conv_out *o) {
  float w[4] = {dccl_fp16_to_f32((uint16_t)i), dccl_bf16_to_f32((uint16_t)i), dccl_e4m3_to_f32((uint8_t)i),
                dccl_e5m2_to_f32((uint8_t)i)};
  o->back[0] = dccl_f32_to_fp16(w[0]);
  o->back[1] = dccl_f32_to_bf16(w[1]);
  o->back[2] = dccl_f32_to_e4m3(w[2]);
  o->back[3] = dccl_f32_to_e5m2(w[3]);
  for (int k = 0; k < 4; k++) o->widened[k] = dccl_f32_bits(w[k]);
}

// Narrowing of arbitrary floats, each format kept apart.
struct narrow_out {
  uint16_t fp16, bf16;
  uint8_t e4m3, e5m2;
};

__global__ void conv_kernel(conv_out *out, const uint32_t *floats, narrow_out *nout, int nfloats) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 65536 || i < nfloats; i += gridDim.x * blockDim.x) {
    if (i < 65536) convert_one((uint32_t)i, &out[i]);
    if (i < nfloats) {
      float x = dccl_f32_from_bits(floats[i]);
      nout[i].fp16 = dccl_f32_to_fp16(x);
      nout[i].bf16 = dccl_f32_to_bf16(x);
      nout[i].e4m3 = dccl_f32_to_e4m3(x);
      nout[i].e5m2 = dccl_f32_to_e5m2(x);
    }
  }
}

static bool test_conversions() {
  // Float inputs: random bit patterns, every narrow value's float and the floats around it, specials.
  std::vector<uint32_t> floats;
  for (int i = 0; i < 200000; i++) floats.push_back((uint32_t)rng());
  for (uint32_t i = 0; i < 65536; i++) {
    uint32_t b = dccl_f32_bits(dccl_fp16_to_f32((uint16_t)i));
    floats.push_back(b), floats.push_back(b + 1), floats.push_back(b - 1), floats.push_back(b + 0x1000);
    floats.push_back(b + 0x1fff), floats.push_back(b + 0x2000);
    floats.push_back(((uint32_t)i << 16) | 0x8000u);  // bf16 midpoints
    floats.push_back(((uint32_t)i << 16) | 0x7fffu);
  }
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f7fffffu, 0x00000001u,
                               0x80000000u, 0x43e00000u, 0x43e80000u, 0x47600000u, 0x47700000u, 0x477ff000u};
  for (uint32_t s : specials) floats.push_back(s);
  int nf = (int)floats.size();

  uint32_t *d_floats = to_device(floats);
  conv_out *d_out = nullptr;
  narrow_out *d_nout = nullptr;
  if (!d_floats) return check(false, "cudaMalloc/cudaMemcpy of test floats"), false;
  CUDA_OK(cudaMalloc(&d_out, 65536 * sizeof(conv_out)));
  CUDA_OK(cudaMalloc(&d_nout, nf * sizeof(narrow_out)));
  conv_kernel<<<256, 256>>>(d_out, d_floats, d_nout, nf);
  CUDA_OK(cudaGetLastError());
  std::vector<conv_out> dev(65536);
  std::vector<narrow_out> ndev(nf);
  CUDA_OK(cudaMemcpy(dev.data(), d_out, dev.size() * sizeof(conv_out), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(ndev.data(), d_nout, ndev.size() * sizeof(narrow_out), cudaMemcpyDeviceToHost));
  cudaFree(d_floats), cudaFree(d_out), cudaFree(d_nout);

  int bad = 0;
  for (uint32_t i = 0; i < 65536; i++) {
    conv_out h;
    convert_one(i, &h);
    for (int k = 0; k < 4; k++) {
      if (k >= 2 && i >= 256) continue;
      if (h.widened[k] != dev[i].widened[k] || h.back[k] != dev[i].back[k]) {
        if (bad++ < 5)
          printf("  format %d pattern 0x%x: host %08x/%x, device %08x/%x\n", k, i, h.widened[k], h.back[k],
                 dev[i].widened[k], dev[i].back[k]);
      }
    }
  }
  check(bad == 0, "every fp16/bf16/e4m3/e5m2 pattern widens and narrows back identically on host and device");
  bad = 0;
  for (int i = 0; i < nf; i++) {
    float x = dccl_f32_from_bits(floats[i]);
    narrow_out h = {dccl_f32_to_fp16(x), dccl_f32_to_bf16(x), dccl_f32_to_e4m3(x), dccl_f32_to_e5m2(x)};
    if (memcmp(&h, &ndev[i], sizeof h) != 0 && bad++ < 5)
      printf("  float %08x: host %04x %04x %02x %02x, device %04x %04x %02x %02x\n", floats[i], h.fp16, h.bf16, h.e4m3,
             h.e5m2, ndev[i].fp16, ndev[i].bf16, ndev[i].e4m3, ndev[i].e5m2);
  }
  char what[160];
  snprintf(what, sizeof what,
           "%d floats (random, around every fp16 value, bf16 midpoints, specials) narrow "
           "identically on host and device",
           nf);
  check(bad == 0, what);
  return true;
}

// ---- binary ops for every type and kind --------------------------------------------------------------------

#define OPS_PER_CASE 4096
#define NTYPES 12

// Operands are 8 raw bytes each; a type uses its first bytes. Output slot per (type, kind, i).
__global__ void ops_kernel(const uint64_t *a, const uint64_t *b, uint64_t *out) {
  int total = NTYPES * 4 * OPS_PER_CASE;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < total; j += gridDim.x * blockDim.x) {
    int i = j % OPS_PER_CASE, kind = (j / OPS_PER_CASE) % 4, type = j / (4 * OPS_PER_CASE);
    uint64_t r = 0;
    if (dccl_apply_op(type, kind, &a[i], &b[i], &r) != 0) r = ~0ull;
    out[j] = r;
  }
}

static bool type_is_float(int type) {
  return type >= ncclFloat16;
}

// A NaN in either result? Which NaN payload an operation returns differs between x86 and the GPU.
static bool is_nan_of(int type, uint64_t v) {
  switch (type) {
    case ncclFloat16:
      return dccl_fp16_to_f32((uint16_t)v) != dccl_fp16_to_f32((uint16_t)v);
    case ncclFloat32:
      return dccl_f32_isnan(dccl_f32_from_bits((uint32_t)v));
    case ncclFloat64:
      return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    case ncclBfloat16:
      return dccl_f32_isnan(dccl_bf16_to_f32((uint16_t)v));
    case ncclFloat8e4m3:
      return (v & 0x7f) == 0x7f;
    case ncclFloat8e5m2:
      return (v & 0x7f) > 0x7c;
    default:
      return false;
  }
}

static uint64_t float_operand(int type) {
  // Mostly moderate values, sometimes raw bits (NaN, inf, subnormals, huge values).
  uint64_t r = rng();
  if (r % 4 == 0) return rng();
  double x = ((double)(r >> 11) / (double)(1ull << 53) - 0.5) * 64;
  float f = (float)x;
  switch (type) {
    case ncclFloat16:
      return dccl_f32_to_fp16(f);
    case ncclFloat32:
      return dccl_f32_bits(f);
    case ncclFloat64: {
      uint64_t u;
      memcpy(&u, &x, sizeof u);
      return u;
    }
    case ncclBfloat16:
      return dccl_f32_to_bf16(f);
    case ncclFloat8e4m3:
      return dccl_f32_to_e4m3(f);
    default:
      return dccl_f32_to_e5m2(f);
  }
}

static bool test_ops() {
  // Each type reads the first bytes of an 8-byte operand.
  std::vector<uint64_t> a(OPS_PER_CASE), b(OPS_PER_CASE);
  for (int i = 0; i < OPS_PER_CASE; i++) a[i] = rng(), b[i] = rng();
  size_t nout = (size_t)NTYPES * 4 * OPS_PER_CASE;
  const char *names[NTYPES] = {"int8",    "uint8",   "int32",   "uint32",   "int64",      "uint64",
                               "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  // Launch 0: random bits, checked for the integer types. Launch 1..6: values for one float type each.
  for (int launch = 0; launch < 1 + (NTYPES - ncclFloat16); launch++) {
    int ftype = launch == 0 ? -1 : ncclFloat16 + launch - 1;
    std::vector<uint64_t> la = a, lb = b;
    if (ftype >= 0)
      for (int i = 0; i < OPS_PER_CASE; i++) la[i] = float_operand(ftype), lb[i] = float_operand(ftype);
    uint64_t *d_a = to_device(la), *d_b = to_device(lb), *d_out = nullptr;
    if (!d_a || !d_b) return check(false, "cudaMalloc/cudaMemcpy of operands"), false;
    CUDA_OK(cudaMalloc(&d_out, nout * sizeof(uint64_t)));
    ops_kernel<<<192, 256>>>(d_a, d_b, d_out);
    CUDA_OK(cudaGetLastError());
    std::vector<uint64_t> res(nout);
    CUDA_OK(cudaMemcpy(res.data(), d_out, res.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    cudaFree(d_a), cudaFree(d_b), cudaFree(d_out);
    for (int type = 0; type < NTYPES; type++) {
      bool mine = ftype >= 0 ? type == ftype : !type_is_float(type);
      if (!mine) continue;
      for (int kind = 0; kind < 4; kind++) {
        int bad = 0;
        for (int i = 0; i < OPS_PER_CASE; i++) {
          uint64_t h = 0, d = res[(type * 4 + kind) * OPS_PER_CASE + i];
          if (dccl_apply_op(type, kind, &la[i], &lb[i], &h) != 0) h = ~0ull;
          bool same = h == d || (type_is_float(type) && is_nan_of(type, h) && is_nan_of(type, d));
          if (!same && bad++ < 3)
            printf("  %s kind %d: a=%llx b=%llx host %llx device %llx\n", names[type], kind, (unsigned long long)la[i],
                   (unsigned long long)lb[i], (unsigned long long)h, (unsigned long long)d);
        }
        char what[120];
        snprintf(what, sizeof what, "%s %s: %d operand pairs give the same result on host and device", names[type],
                 kind == 0   ? "sum"
                 : kind == 1 ? "prod"
                 : kind == 2 ? "max"
                             : "min",
                 OPS_PER_CASE);
        check(bad == 0, what);
      }
    }
  }
  return true;
}

// ---- schedules -----------------------------------------------------------------------------------------------

#define STEPS_KEPT 64  // per (config, stream): the first 48 steps and the last 16

struct sched_result {
  uint64_t nsteps;
  struct dccl_prim_step steps[STEPS_KEPT];
};

__host__ __device__ static void run_schedule(const struct dccl_sched *s, int stream, sched_result *r) {
  r->nsteps = dccl_sched_nsteps(s, stream);
  for (int k = 0; k < STEPS_KEPT; k++) {
    uint64_t idx = r->nsteps <= STEPS_KEPT || k < 48 ? (uint64_t)k : r->nsteps - (uint64_t)(STEPS_KEPT - k);
    if (idx < r->nsteps) dccl_sched_step(s, stream, idx, &r->steps[k]);
  }
}

__global__ void sched_kernel(const struct dccl_sched *cfg, int ncfg, sched_result *out) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < 2 * ncfg; j += gridDim.x * blockDim.x)
    run_schedule(&cfg[j / 2], j % 2, &out[j]);
}

static bool same_step(const struct dccl_prim_step &x, const struct dccl_prim_step &y) {
  return x.flags == y.flags && x.in_off == y.in_off && x.out_off == y.out_off && x.nelem == y.nelem &&
         x.wait_up == y.wait_up;
}

static bool test_schedules() {
  const int algos[] = {DCCL_SCHED_RING_ALLREDUCE,  DCCL_SCHED_RING_ALLGATHER, DCCL_SCHED_RING_REDUCESCATTER,
                       DCCL_SCHED_CHAIN_BROADCAST, DCCL_SCHED_CHAIN_REDUCE,   DCCL_SCHED_TREE_ALLREDUCE,
                       DCCL_SCHED_TREE_BROADCAST,  DCCL_SCHED_TREE_REDUCE,    DCCL_SCHED_P2P_SEND,
                       DCCL_SCHED_P2P_RECV,        DCCL_SCHED_LOCAL_COPY};
  const int nranks_list[] = {1, 2, 3, 5, 8};
  const uint64_t counts[] = {1, 1000, 4097};
  const uint64_t chunks[] = {1, 64, 1000};
  // Ring order: a permutation of 0..7, so allgather/reduce-scatter offsets depend on it.
  const int ring_host[8] = {3, 0, 7, 1, 6, 2, 5, 4};
  std::vector<int> ring_vec(ring_host, ring_host + 8);
  int *ring_dev = to_device(ring_vec);
  if (!ring_dev) return check(false, "cudaMalloc/cudaMemcpy of the ring order"), false;

  std::vector<struct dccl_sched> host_cfg, dev_cfg;
  for (int algo : algos)
    for (int n : nranks_list)
      for (int pos = 0; pos < n; pos++)
        for (uint64_t count : counts)
          for (uint64_t chunk : chunks) {
            struct dccl_sched s;
            memset(&s, 0, sizeof s);
            s.algo = algo;
            s.nranks = n;
            s.pos = pos;
            s.begin = 5 * (uint64_t)pos;
            s.count = count;
            s.block = count + 7;
            s.chunk = chunk;
            s.is_root = pos == 0;
            s.has_parent = pos != 0;
            s.nchildren = (dccl_tree_child_pos(pos, 0, n) >= 0) + (dccl_tree_child_pos(pos, 1, n) >= 0);
            s.ring_rank = ring_host;
            host_cfg.push_back(s);
            s.ring_rank = ring_dev;
            dev_cfg.push_back(s);
          }
  int ncfg = (int)host_cfg.size();
  struct dccl_sched *d_cfg = to_device(dev_cfg);
  sched_result *d_out = nullptr;
  if (!d_cfg) return check(false, "cudaMalloc/cudaMemcpy of schedule configs"), false;
  CUDA_OK(cudaMalloc(&d_out, 2 * ncfg * sizeof(sched_result)));
  CUDA_OK(cudaMemset(d_out, 0, 2 * ncfg * sizeof(sched_result)));
  sched_kernel<<<64, 128>>>(d_cfg, ncfg, d_out);
  CUDA_OK(cudaGetLastError());
  std::vector<sched_result> dev(2 * ncfg);
  CUDA_OK(cudaMemcpy(dev.data(), d_out, dev.size() * sizeof(sched_result), cudaMemcpyDeviceToHost));
  cudaFree(d_cfg), cudaFree(d_out), cudaFree(ring_dev);

  int bad = 0;
  long steps_compared = 0;
  std::vector<sched_result> host(2 * ncfg);
  memset(host.data(), 0, host.size() * sizeof(sched_result));
  for (int j = 0; j < 2 * ncfg; j++) {
    run_schedule(&host_cfg[j / 2], j % 2, &host[j]);
    bool same = host[j].nsteps == dev[j].nsteps;
    for (int k = 0; k < STEPS_KEPT; k++) same = same && same_step(host[j].steps[k], dev[j].steps[k]);
    steps_compared += host[j].nsteps < STEPS_KEPT ? (long)host[j].nsteps : STEPS_KEPT;
    if (!same && bad++ < 5) {
      const struct dccl_sched &s = host_cfg[j / 2];
      printf("  algo %d nranks %d pos %d count %llu chunk %llu stream %d: nsteps host %llu device %llu\n", s.algo,
             s.nranks, s.pos, (unsigned long long)s.count, (unsigned long long)s.chunk, j % 2,
             (unsigned long long)host[j].nsteps, (unsigned long long)dev[j].nsteps);
    }
  }
  char what[160];
  snprintf(what, sizeof what, "schedule.h: %d configs x 2 streams (%ld steps) identical on host and device", ncfg,
           steps_compared);
  check(bad == 0, what);
  return true;
}

int main() {
  int ndev = 0;
  cudaError_t err = cudaGetDeviceCount(&ndev);
  if (err != cudaSuccess || ndev == 0) {
    printf("device_shared_test: no usable CUDA device (%s): cannot run, exit 77\n",
           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  bool ran = test_conversions() && test_ops() && test_schedules();
  if (!ran) n_failed++;
  printf("device_shared_test: %d passed, %d failed\n", n_passed, n_failed);
  return n_failed ? 1 : 0;
}
