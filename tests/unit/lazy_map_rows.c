/* The bookkeeping of buffers mapped on first use (src/core/comm_lazy_map.c), without a GPU: the module is built with
 * fakes of what it calls (the bootstrap's allgather, the driver's exports and imports, the device table), seen from
 * rank 0 of 3 ranks in processes of their own, each peer's side of every meeting scripted. Checked: a first call
 * maps each role's row and says so in a second meeting; the same buffers again find their rows without mapping
 * anything; an allocation freed and made again at the same address (a new buffer id) drops the rows naming the old
 * one and closes its mappings; a rank that cannot take part (or a failed mapping anywhere) leaves the call to the
 * FIFO algorithms on every rank; at most 32 rows, the least recently used replaced (after the communicator's
 * kernels), none a rank's open group still needs; rows never take a slot an explicit window holds; at the end every
 * mapping opened is closed once. cuMem allocations (the FD kind): a new one goes from its owner to every other rank
 * as a descriptor (one for an in-place call), none once a row names it; a peer's stand-in or this rank's failed
 * export (sent as a stand-in, ok 0) leaves every rank on the FIFO algorithms; no descriptor is left open; without
 * every rank's descriptor socket cuMem buffers never meet as mappable. Below DCCL_LAZY_MAP_BYTES a call meets only
 * where every buffer it uses is registered (ncclCommRegister), and is then mapped like any. Reserved ranges of
 * several allocations (the SPAN kind, expandable segments; core/lazy_spans.c): a buffer's parts travel once each,
 * both buffers of a call sharing a part send it once; one row serves every buffer of the ranges; the peers' ranges
 * are mirrored once each, parts mapped at their offsets; a part replaced in place is unmapped (after the kernels)
 * and the new one mapped; a part a peer cannot map drops every row of the ranges given parts at that meeting and
 * their mirrors; at the end every mirror is unmapped and freed, and no descriptor is left open. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/device/dev_exec.h"
#include "core/comm.h"
#include "core/comm_board.h"
#include "core/comm_lazy_map.h"
#include "util/cuda_driver.h"
#include "util/cuda_peer_mem.h"
#include "util/fd_pass.h"
#include "unit_check.h"

#define NRANKS 3

/* The scripted world: each rank's buffers of the next call (an allocation's base and buffer id), who can take
 * part, whose mapping fails. */
static struct {
  uint64_t base[NRANKS][2], id[NRANKS][2];
  int kind[NRANKS][2]; /* 0: legacy (cudaMalloc), else DCCL_PEER_MEM_FD (cuMem) */
  int ok[NRANKS], map_ok[NRANKS], capturing, depth;
  int allgathers, waits, table_writes, opens, closes, fail_import_id;
  /* Descriptors: peers whose socket is missing at creation, this rank's exports (and whether they fail), letters
   * sent (the last exchange's notes), descriptors the peers send (stand-ins where peer_fd_ok is 0), imports given
   * one. */
  int no_socket, exports, export_fails, exchanges, letters, expected, fd_imports, peer_fd_ok, registered;
  struct dccl_fd_note sent[16];
  /* Reserved ranges (the SPAN kind): each rank's parts of the next call per buffer, the parts the peers send at
   * it (a queue of rank and buffer id, each exchange taking what it expects from its head), and the counts. */
  struct dccl_peer_mem_parts parts[NRANKS][2];
  struct {
    int rank;
    uint64_t id;
  } queue[512];
  int queued, dequeued, part_exports, reserves, frees, maps, unmaps, part_gathers;
  uint64_t fail_map_id;
} w;

/* Rank r's reserved range: 64 MiB at its own address; part j (2 MiB at 2 MiB x j) has buffer id 5000 + 100 r + j
 * + 50 x generation. */
#define SPAN_BASE(r) (0x7000000000ull + 0x100000000ull * (uint64_t)(r))
#define SPAN_BYTES (256ull << 20)

ncclResult_t dccl_bootstrap_allgather(struct dccl_bootstrap *boot, void *buf, size_t size) {
  (void)boot;
  w.allgathers++;
  unsigned char *all = buf;
  if (size == DCCL_FD_NAME_BYTES) { /* creation: every rank's descriptor socket */
    for (int r = 1; r < NRANKS; r++)
      if (!w.no_socket) snprintf((char *)all + (size_t)r * size + 1, size - 1, "peer-%d", r);
    return ncclSuccess;
  }
  if (size == 2 * sizeof(struct dccl_peer_mem_parts)) { /* the spans' parts (struct lazy_parts) */
    for (int r = 1; r < NRANKS; r++) memcpy(all + (size_t)r * size, w.parts[r], size);
    w.part_gathers++;
    return ncclSuccess;
  }
  if (size == sizeof(int32_t)) { /* the second meeting: whether each rank mapped */
    for (int r = 1; r < NRANKS; r++) ((int32_t *)buf)[r] = w.map_ok[r];
    return ncclSuccess;
  }
  /* The first: each peer says what rank 0 says for itself, with its own allocations (struct lazy_say's layout:
   * ok, busy, then the two exports). */
  for (int r = 1; r < NRANKS; r++) {
    unsigned char *say = all + (size_t)r * size;
    memcpy(say, all, size);
    *(int32_t *)say = w.ok[r];
    *(uint32_t *)(say + 4) = 0;
    struct dccl_peer_mem_export *e = (struct dccl_peer_mem_export *)(say + 8);
    for (int role = 0; role < 2; role++) {
      e[role].kind = w.kind[r][role] ? w.kind[r][role] : DCCL_PEER_MEM_LEGACY;
      e[role].base = e[role].kind == DCCL_PEER_MEM_SPAN ? SPAN_BASE(r) : w.base[r][role];
      e[role].bytes = e[role].kind == DCCL_PEER_MEM_SPAN ? SPAN_BYTES : 0;
      e[role].id = e[role].kind == DCCL_PEER_MEM_SPAN ? SPAN_BYTES : w.id[r][role];
    }
  }
  return ncclSuccess;
}

/* No board: every meeting goes through the bootstrap's allgather above. */
ncclResult_t dccl_comm_board_open(struct dccl_comm *c, size_t max_bytes, struct dccl_shm_board **out) {
  (void)c, (void)max_bytes;
  *out = NULL;
  return ncclSuccess;
}
ncclResult_t dccl_comm_board_allgather(struct dccl_comm *c, struct dccl_shm_board *b, void *data, size_t size,
                                       const struct dccl_slot_header *call) {
  (void)c, (void)b, (void)data, (void)size, (void)call;
  return ncclInternalError;
}
void dccl_shm_board_close(struct dccl_shm_board *b) { (void)b; }
struct dccl_slot_header dccl_op_call_header(const struct dccl_op *o) {
  (void)o;
  return (struct dccl_slot_header){0};
}

int dccl_peer_mem_describe(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e,
                           struct dccl_peer_mem_parts *parts) {
  (void)bytes;
  memset(e, 0, sizeof(*e));
  uint64_t p = (uint64_t)(uintptr_t)ptr;
  for (int b = 0; b < 2; b++)
    if (p == w.base[0][b] && w.kind[0][b] == DCCL_PEER_MEM_SPAN) {
      *e = (struct dccl_peer_mem_export){.kind = DCCL_PEER_MEM_SPAN, .base = SPAN_BASE(0), .bytes = SPAN_BYTES,
                                         .id = SPAN_BYTES};
      *parts = w.parts[0][b];
      return 1;
    } else if (p == w.base[0][b]) {
      e->kind = w.kind[0][b] ? w.kind[0][b] : DCCL_PEER_MEM_LEGACY;
      e->base = p;
      e->bytes = 1 << 20;
      e->id = w.id[0][b];
      return 1;
    }
  return 0;
}
ncclResult_t dccl_peer_mem_export(const void *ptr, size_t bytes, struct dccl_peer_mem_export *e, int *fd) {
  w.exports++;
  if (w.export_fails) {
    *fd = -1;
    return ncclInvalidUsage;
  }
  struct dccl_peer_mem_parts parts;
  dccl_peer_mem_describe(ptr, bytes, e, &parts);
  *fd = open("/dev/null", O_RDONLY);
  return ncclSuccess;
}
ncclResult_t dccl_peer_mem_export_part(uint64_t addr, uint64_t id, int *fd) {
  (void)addr, (void)id;
  w.part_exports++;
  *fd = w.export_fails ? -1 : open("/dev/null", O_RDONLY);
  return w.export_fails ? ncclInvalidUsage : ncclSuccess;
}
ncclResult_t dccl_peer_mem_mirror_reserve(uint64_t start, uint64_t bytes, uint64_t *local) {
  (void)start;
  w.reserves++;
  *local = (1ull << 44) + (uint64_t)w.reserves * bytes;
  return ncclSuccess;
}
ncclResult_t dccl_peer_mem_mirror_map(uint64_t local, const struct dccl_peer_mem_part *p, int fd, int ordinal) {
  (void)local, (void)ordinal;
  if (fd < 0) return ncclInternalError;
  close(fd);
  if (p->id == w.fail_map_id) return ncclUnhandledCudaError;
  w.maps++;
  return ncclSuccess;
}
void dccl_peer_mem_mirror_unmap(uint64_t local, const struct dccl_peer_mem_part *p) {
  (void)local, (void)p;
  w.unmaps++;
}
void dccl_peer_mem_mirror_free(uint64_t local, uint64_t bytes) {
  (void)bytes;
  if (local) w.frees++;
}
ncclResult_t dccl_peer_mem_import(const struct dccl_peer_mem_export *e, int fd, int ordinal,
                                  struct dccl_peer_mem_map *m) {
  (void)ordinal;
  if (e->kind == DCCL_PEER_MEM_FD) { /* like the driver's: the descriptor is the import's, mapped or not */
    if (fd < 0) return ncclInternalError;
    close(fd);
    w.fd_imports++;
  }
  if ((int)e->id == w.fail_import_id) return ncclUnhandledCudaError;
  w.opens++;
  m->kind = e->kind;
  m->base = e->base + (1ull << 40);
  m->bytes = e->bytes;
  return ncclSuccess;
}
ncclResult_t dccl_fd_socket_open(uint64_t tag, int *sock, char name[DCCL_FD_NAME_BYTES]) {
  (void)tag;
  memset(name, 0, DCCL_FD_NAME_BYTES);
  strcpy(name + 1, "rank-0");
  *sock = 1000;
  return ncclSuccess;
}
void dccl_fd_socket_close(int sock) { (void)sock; }
int64_t dccl_fd_exchange_timeout_ms(void) { return 60000; }
ncclResult_t dccl_comm_failure_over(struct dccl_comm *c, ncclResult_t res) {
  (void)c;
  return res;
}
/* The peers' side: each sends the descriptors every rank expects from them (counted by the module: checked against
 * what the peers' allocations say). */
ncclResult_t dccl_fd_exchange(int sock, const struct dccl_fd_letter *out, int nout, int expected, int *fds,
                              struct dccl_fd_note *notes, int64_t timeout_ms, const _Atomic int *stop,
                              const char *what) {
  (void)sock, (void)timeout_ms, (void)stop, (void)what;
  w.exchanges++;
  w.letters = nout;
  for (int i = 0; i < nout && i < 16; i++) w.sent[i] = out[i].note;
  w.expected = expected;
  int k = 0;
  for (int r = 1; r < NRANKS; r++)
    for (int b = 0; b < 2; b++)
      if (w.kind[r][b] == DCCL_PEER_MEM_FD && !(b == 1 && w.id[r][1] == w.id[r][0]) && k < expected) {
        fds[k] = open("/dev/null", O_RDONLY);
        notes[k++] = (struct dccl_fd_note){r, w.peer_fd_ok, w.id[r][b]};
      }
  for (; w.dequeued < w.queued && k < expected; w.dequeued++) {
    fds[k] = open("/dev/null", O_RDONLY);
    notes[k++] = (struct dccl_fd_note){w.queue[w.dequeued].rank, w.peer_fd_ok, w.queue[w.dequeued].id};
  }
  return ncclSuccess;
}
/* ncclCommRegister's ranges: bit b of w.registered says this rank's buffer b (send 0, recv 1) lies in one. */
int dccl_comm_is_registered(struct dccl_comm *c, const void *ptr, uint64_t bytes) {
  (void)c, (void)bytes;
  uint64_t p = (uint64_t)(uintptr_t)ptr;
  return ((w.registered & 1) && p == w.base[0][0]) || ((w.registered & 2) && p == w.base[0][1]);
}
void dccl_peer_mem_close(struct dccl_peer_mem_map *m) {
  if (m->base) w.closes++;
  m->base = 0;
}
void dccl_dev_comm_wait(struct dccl_coll_comm *comm) {
  (void)comm;
  w.waits++;
}
ncclResult_t dccl_dev_comm_set_window(struct dccl_coll_comm *comm, int index, const struct dccl_win_peer *row) {
  (void)comm, (void)index, (void)row;
  w.table_writes++;
  return ncclSuccess;
}
int dccl_dev_ce_on(const struct dccl_coll_comm *comm) {
  (void)comm;
  return 0;
}
int dccl_cuda_stream_capturing(cudaStream_t stream) {
  (void)stream;
  return w.capturing;
}
void *dccl_cuda_get_current(void) { return NULL; }
void dccl_cuda_set_current(void *ctx) { (void)ctx; }
int dccl_group_depth(void) { return w.depth; }
const char *dccl_op_name(int kind) {
  (void)kind;
  return "ncclAllReduce";
}

static struct dccl_comm comm;
static struct dccl_peer_info peers[NRANKS];
static struct dccl_op op;

/* Buffer set k: every rank's send allocation at 0x10000000 * (r + 1) + 2 MiB * k (id 1000 r + k), recv after it. */
static void buffers(int k, int id_shift) {
  for (int r = 0; r < NRANKS; r++)
    for (int b = 0; b < 2; b++) {
      w.base[r][b] = 0x10000000ull * (uint64_t)(r + 1) + (2ull << 20) * (uint64_t)(2 * k + b);
      w.id[r][b] = 1000 * (uint64_t)r + (uint64_t)(2 * k + b) + (uint64_t)id_shift;
    }
}

/* One all-reduce on the buffers set now, on communicator c: 1 with its windows set (the direct path), 0 (the FIFO
 * algorithms). */
static int call_on(struct dccl_comm *c, int k) {
  memset(&op, 0, sizeof(op));
  op.kind = DCCL_OP_ALLREDUCE;
  op.on_device = 1;
  op.count = 1 << 18; /* 1 MiB: DCCL_LAZY_MAP_BYTES */
  op.esize = 4;
  op.sendbuff = (const void *)(uintptr_t)w.base[0][0];
  op.recvbuff = (void *)(uintptr_t)w.base[0][1];
  op.send_win = op.recv_win = -1;
  check(dccl_lazy_map_applies(c, &op), "set %d: the call meets the other ranks", k);
  check(dccl_lazy_map_call(c, &op) == ncclSuccess, "set %d: the meeting succeeds", k);
  return op.send_win >= 0 && op.recv_win >= 0;
}

/* The same on set k. */
static int call(int k, int id_shift) {
  buffers(k, id_shift);
  return call_on(&comm, k);
}

/* Set k in place: each rank's send and recv buffer is one allocation. */
static int call_in_place(int k) {
  buffers(k, 0);
  for (int r = 0; r < NRANKS; r++) {
    w.base[r][1] = w.base[r][0];
    w.id[r][1] = w.id[r][0];
  }
  return call_on(&comm, k);
}

/* How many descriptors this process holds open. */
static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  while (d && readdir(d)) n++;
  if (d) closedir(d);
  return n;
}

/* cuMem allocations on every rank: descriptors travel once per new allocation, and every one is closed. */
static void cumem_cases(void) {
  int fd_mark = open_fds();
  for (int r = 0; r < NRANKS; r++) w.kind[r][0] = w.kind[r][1] = DCCL_PEER_MEM_FD;
  w.peer_fd_ok = 1;
  int exchanges = w.exchanges, fd_imports = w.fd_imports;
  check(call(200, 0) && w.exchanges == exchanges + 1 && w.letters == 4 && w.expected == 4 &&
        w.fd_imports - fd_imports == 4,
        "cuMem, first use: direct; %d exchange(s), %d letters sent (2 roles x 2 peers), %d expected, %d mapped by "
        "descriptor", w.exchanges - exchanges, w.letters, w.expected, w.fd_imports - fd_imports);
  check(w.sent[0].rank == 0 && w.sent[0].ok == 1 && w.sent[0].tag == w.id[0][0] && w.sent[2].tag == w.id[0][1],
        "cuMem: the letters name this rank and its allocations' buffer ids");
  check(call(200, 0) && w.exchanges == exchanges + 1, "cuMem again: direct, no descriptor sent");
  exchanges = w.exchanges;
  check(call_in_place(201) && w.exchanges == exchanges + 1 && w.letters == 2 && w.expected == 2,
        "cuMem in place: one allocation each, %d letters, %d expected", w.letters, w.expected);
  w.peer_fd_ok = 0;
  check(!call(202, 0), "a peer's stand-in descriptor: FIFO algorithms");
  w.peer_fd_ok = 1;
  w.export_fails = 1;
  w.map_ok[1] = w.map_ok[2] = 0; /* what the peers say after receiving stand-ins */
  check(!call(203, 0) && w.letters == 4 && !w.sent[0].ok && !w.sent[1].ok,
        "this rank's export fails: stand-ins sent (ok 0), FIFO algorithms");
  w.export_fails = 0;
  w.map_ok[1] = w.map_ok[2] = 1;
  check(call(203, 0), "the export works again: direct");
  w.kind[1][0] = 0; /* a mix: rank 1's send buffer is cudaMalloc memory */
  check(call(204, 0) && w.expected == 3, "cudaMalloc and cuMem mixed: direct, %d descriptors expected", w.expected);
  check(open_fds() == fd_mark, "cuMem: no descriptor left open (%d more)", open_fds() - fd_mark);

  /* A communicator where a rank has no descriptor socket: cuMem buffers take the FIFO algorithms, unexchanged. */
  static struct dccl_comm other;
  other = comm;
  other.lazy = NULL;
  w.no_socket = 1;
  check(dccl_lazy_map_init(&other) == ncclSuccess && other.lazy, "creation without every rank's socket");
  w.no_socket = 0;
  exchanges = w.exchanges;
  buffers(205, 0);
  check(!call_on(&other, 205) && w.exchanges == exchanges, "no sockets: cuMem buffers take the FIFO algorithms");
  for (int r = 0; r < NRANKS; r++) w.kind[r][0] = w.kind[r][1] = 0;
  buffers(206, 0);
  check(call_on(&other, 206), "no sockets: cudaMalloc buffers still direct");
  dccl_lazy_map_free(&other);
}

/* Every rank's send buffer in parts [s0, s1] of its range and recv buffer in [r0, r1] (generation g of part ids,
 * for parts from `from` on); the peers send the parts `sends` lists (rank 0 sends its own alike). */
static void span_buffers(int s0, int s1, int r0, int r1, int g, int from) {
  int lo[2] = {s0, r0}, hi[2] = {s1, r1};
  for (int r = 0; r < NRANKS; r++)
    for (int b = 0; b < 2; b++) {
      w.kind[r][b] = DCCL_PEER_MEM_SPAN;
      w.base[r][b] = SPAN_BASE(r) + (2ull << 20) * (uint64_t)lo[b] + 4096; /* inside a part */
      w.parts[r][b].n = 0;
      for (int j = lo[b]; j <= hi[b]; j++)
        w.parts[r][b].part[w.parts[r][b].n++] =
            (struct dccl_peer_mem_part){(2ull << 20) * (uint64_t)j, 2ull << 20, 5000 + 100 * (uint64_t)r + (uint64_t)j +
                                                                                   (j >= from ? 50 * (uint64_t)g : 0)};
    }
}
static void peers_send(int n, const int *parts, int g, int from) {
  w.queued = w.dequeued = 0;
  for (int r = 1; r < NRANKS; r++)
    for (int i = 0; i < n; i++, w.queued++) {
      w.queue[w.queued].rank = r;
      w.queue[w.queued].id = 5000 + 100 * (uint64_t)r + (uint64_t)parts[i] + (parts[i] >= from ? 50 * (uint64_t)g : 0);
    }
}

/* Reserved ranges of several allocations (expandable segments). */
static void span_cases(void) {
  int fd_mark = open_fds();
  w.peer_fd_ok = 1;
  int ex = w.exchanges, gathers = w.allgathers, writes = w.table_writes;
  /* Send in parts 0-2, recv in 2-4: five parts a rank, part 2 once. */
  span_buffers(0, 2, 2, 4, 0, 99);
  peers_send(5, (int[]){0, 1, 2, 3, 4}, 0, 99);
  int direct = call_on(&comm, 400);
  check(direct && op.send_win == op.recv_win && w.exchanges == ex + 1 && w.letters == 10 &&
        w.expected == 10 && w.part_exports == 5 && w.reserves == 2 && w.maps == 10 &&
        w.table_writes == writes + 1 && w.allgathers == gathers + 3 && w.part_gathers == 1,
        "spans, first use: one row for both buffers (%d, %d), %d letters (5 parts x 2 peers), %d expected, %d "
        "exported, %d mirrors, %d parts mapped, %d rows written, %d meetings", op.send_win, op.recv_win, w.letters,
        w.expected, w.part_exports, w.reserves, w.maps, w.table_writes - writes, w.allgathers - gathers);
  check(w.sent[0].tag == 5000 && w.sent[2].tag == 5001 && w.sent[0].rank == 0 && w.sent[0].ok,
        "spans: the letters name this rank's parts by buffer id");
  int row = op.send_win;
  ex = w.exchanges, gathers = w.allgathers;
  direct = call_on(&comm, 401);
  check(direct && op.send_win == row && w.exchanges == ex && w.maps == 10 && w.allgathers == gathers + 2,
        "spans again: the same row, nothing exchanged or mapped, one meeting (the says, then the parts)");
  /* Other buffers of the same ranges: only their new parts (5, 6) travel; the row stays. */
  span_buffers(3, 5, 5, 6, 0, 99);
  peers_send(2, (int[]){5, 6}, 0, 99);
  direct = call_on(&comm, 402);
  check(direct && op.send_win == row && w.letters == 4 && w.expected == 4 && w.maps == 14 &&
        w.reserves == 2, "spans, other buffers: the same row (%d), %d letters, %d expected, %d mapped",
        op.send_win, w.letters, w.expected, w.maps);
  /* Part 4 replaced on every rank: unmapped in both mirrors after the kernels, the new one mapped. */
  int waits = w.waits;
  span_buffers(4, 4, 4, 4, 1, 4);
  peers_send(1, (int[]){4}, 1, 4);
  direct = call_on(&comm, 403);
  check(direct && op.send_win == row && w.unmaps == 2 && w.maps == 16 && w.waits > waits,
        "spans, a part replaced: %d unmapped, %d mapped, %d waits", w.unmaps, w.maps, w.waits - waits);
  /* A peer's new part cannot be mapped here: FIFO algorithms; the ranges' rows and mirrors go. */
  span_buffers(7, 7, 7, 7, 0, 99);
  peers_send(1, (int[]){7}, 0, 99);
  w.fail_map_id = 5000 + 100 + 7;
  w.map_ok[1] = w.map_ok[2] = 0;
  direct = call_on(&comm, 404);
  check(!direct && w.frees == 2 && w.unmaps == w.maps,
        "spans, a part not mapped: FIFO; %d mirrors freed, %d of %d parts unmapped", w.frees, w.unmaps, w.maps);
  w.fail_map_id = 0;
  w.map_ok[1] = w.map_ok[2] = 1;
  span_buffers(0, 2, 2, 4, 0, 99);
  peers_send(5, (int[]){0, 1, 2, 3, 4}, 0, 99);
  direct = call_on(&comm, 405);
  check(direct && w.expected == 10 && w.reserves == 4, "spans after the failure: all listed afresh");
  /* 64 parts a buffer, both buffers apart, on 3 ranks: 384 parts, exchanged in batches of at most 256. */
  span_buffers(0, 63, 64, 127, 2, 0);
  int all_parts[128];
  for (int j = 0; j < 128; j++) all_parts[j] = j;
  peers_send(128, all_parts, 2, 0);
  ex = w.exchanges;
  int maps = w.maps;
  direct = call_on(&comm, 406);
  check(direct && w.exchanges == ex + 2 && w.dequeued == 256 && w.maps - maps == 256 && w.expected == 128,
        "384 parts: direct; %d exchanges (the last expecting %d), %d parts mapped", w.exchanges - ex, w.expected,
        w.maps - maps);
  w.queued = w.dequeued = 0;
  check(open_fds() == fd_mark, "spans: no descriptor left open (%d more)", open_fds() - fd_mark);
}

/* Below DCCL_LAZY_MAP_BYTES a call meets only where both its buffers are registered (ncclCommRegister). */
static void registered_cases(void) {
  buffers(300, 0);
  memset(&op, 0, sizeof(op));
  op.kind = DCCL_OP_ALLREDUCE;
  op.on_device = 1;
  op.count = 2; /* 8 bytes */
  op.esize = 4;
  op.sendbuff = (const void *)(uintptr_t)w.base[0][0];
  op.recvbuff = (void *)(uintptr_t)w.base[0][1];
  op.send_win = op.recv_win = -1;
  w.registered = 0;
  check(!dccl_lazy_map_applies(&comm, &op), "8 bytes, unregistered: no meeting (below DCCL_LAZY_MAP_BYTES)");
  w.registered = 1;
  check(!dccl_lazy_map_applies(&comm, &op), "8 bytes, only the send buffer registered: no meeting");
  w.registered = 3;
  check(dccl_lazy_map_applies(&comm, &op), "8 bytes, both buffers registered: the ranks meet");
  check(dccl_lazy_map_call(&comm, &op) == ncclSuccess && op.send_win >= 0 && op.recv_win >= 0,
        "8 bytes, registered: mapped, the direct algorithms may run");
  op.send_win = DCCL_WINDOW_UNUSED; /* a call that reads no send buffer here */
  op.recv_win = -1;
  w.registered = 2;
  check(dccl_lazy_map_applies(&comm, &op), "the send buffer unused, the receive buffer registered: the ranks meet");
  w.registered = 1;
  check(!dccl_lazy_map_applies(&comm, &op), "the send buffer unused, only it registered: no meeting");
  w.registered = 0;
}

/* DCCL_LAZY_MAP_BYTES (1 MiB here) names the call's larger buffer: an all-gather's output, a reduce-scatter's input
 * (NRANKS blocks), not a rank's block. */
static void larger_buffer_cases(void) {
  memset(&op, 0, sizeof(op));
  op.on_device = 1;
  op.esize = 4;
  op.sendbuff = (const void *)(uintptr_t)w.base[0][0];
  op.recvbuff = (void *)(uintptr_t)w.base[0][1];
  op.send_win = op.recv_win = -1;
  op.count = ((1 << 18) + NRANKS - 1) / NRANKS; /* the least block whose NRANKS fill 1 MiB */
  const size_t all = NRANKS * op.count * 4;
  op.kind = DCCL_OP_ALLGATHER;
  check(dccl_lazy_map_applies(&comm, &op), "all-gather of %zu bytes in all (a block of %zu): the ranks meet", all,
        op.count * 4);
  op.kind = DCCL_OP_REDUCESCATTER;
  check(dccl_lazy_map_applies(&comm, &op), "reduce-scatter of %zu bytes in all: the ranks meet", all);
  op.kind = DCCL_OP_ALLREDUCE;
  check(!dccl_lazy_map_applies(&comm, &op), "all-reduce of %zu bytes: no meeting", op.count * 4);
  op.kind = DCCL_OP_BROADCAST;
  check(!dccl_lazy_map_applies(&comm, &op), "broadcast of %zu bytes: no meeting", op.count * 4);
  op.count--;
  op.kind = DCCL_OP_ALLGATHER;
  check(!dccl_lazy_map_applies(&comm, &op), "all-gather of %zu bytes in all: no meeting", all - 4 * NRANKS);
}

int main(void) {
  setenv("DCCL_LAZY_MAP_BYTES", "1048576", 1);
  comm.rank = 0;
  comm.nranks = NRANKS;
  comm.peers = peers;
  for (int r = 0; r < NRANKS; r++) peers[r].pid = 100 + r;
  comm.coll.direct_ok = DCCL_DIRECT_WINDOWS;
  static struct dccl_window *explicit_window; /* a stand-in: only its slot's being taken matters */
  comm.windows[0] = (struct dccl_window *)&explicit_window;
  for (int r = 0; r < NRANKS; r++) w.ok[r] = w.map_ok[r] = 1;
  w.fail_import_id = -1;
  check(dccl_lazy_map_init(&comm) == ncclSuccess && comm.lazy, "creation: one rank per process, windows: calls meet");
  check(w.allgathers == 1, "creation: the descriptor sockets' names gathered once (%d)", w.allgathers);
  w.allgathers = 0;

  /* First use: both rows made (two table writes), a second meeting, 2 peers x 2 roles mapped. */
  int direct = call(0, 0);
  check(direct && op.send_win != op.recv_win && op.send_win != 0 && op.recv_win != 0,
        "first use: rows %d and %d (not the explicit window's 0)", op.send_win, op.recv_win);
  check(w.allgathers == 2 && w.table_writes == 2 && w.opens == 4, "first use: %d meetings, %d rows written, %d "
        "mappings", w.allgathers, w.table_writes, w.opens);
  int first_send = op.send_win;
  /* The same buffers: found, one meeting, nothing mapped. */
  direct = call(0, 0);
  check(direct && op.send_win == first_send && w.allgathers == 3 && w.opens == 4,
        "again: the same rows (%d), %d meetings, %d mappings", op.send_win, w.allgathers, w.opens);
  /* Every rank's allocations freed and made again at the same addresses (new buffer ids): the old rows go (their 4
   * mappings, after the kernels), new ones are made. */
  int waits = w.waits;
  direct = call(0, 7);
  check(direct && w.closes == 4 && w.waits > waits && w.opens == 8,
        "reallocated: %d closed, %d mapped, %d waits for the kernels", w.closes, w.opens, w.waits - waits);
  /* A rank that cannot take part: every rank keeps to the FIFO algorithms, nothing mapped. */
  w.ok[2] = 0;
  int opens = w.opens;
  check(!call(1, 0) && w.opens == opens, "rank 2 cannot take part: FIFO algorithms, nothing mapped");
  w.ok[2] = 1;
  /* This rank's mapping fails: the second meeting says so, the new rows go, FIFO algorithms. */
  buffers(2, 0);
  w.fail_import_id = (int)w.id[1][0];
  int closes = w.closes;
  check(!call(2, 0), "a failed mapping: FIFO algorithms");
  w.fail_import_id = -1;
  check(w.closes - closes == w.opens - opens, "a failed mapping: what it did map is closed (%d of %d)",
        w.closes - closes, w.opens - opens);
  /* A peer's mapping fails: the same. */
  w.map_ok[1] = 0;
  check(!call(3, 0), "a peer could not map: FIFO algorithms");
  w.map_ok[1] = 1;
  /* Many sets: at most 32 rows, the least recently used replaced; the live rows' mappings stay open. */
  for (int k = 10; k < 60; k++) check(call(k, 0), "set %d: direct", k);
  check(w.opens - w.closes == 32 * 2, "after 50 sets: %d mappings open (32 rows x 2 peers)", w.opens - w.closes);
  /* In a group, rows of the group's earlier calls are not replaced: the 33rd new set of one group finds no row. */
  w.depth = 1;
  int rows_seen[64] = {0}, reused = 0, all_direct = 1;
  for (int k = 100; k < 116; k++) {
    all_direct &= call(k, 0);
    reused |= rows_seen[op.send_win]++ > 0 || rows_seen[op.recv_win]++ > 0;
  }
  check(all_direct && !reused, "a group of 16 calls (32 rows): direct, no row taken twice");
  check(!call(116, 0), "the group's 17th call finds no free row: FIFO algorithms");
  w.depth = 0;
  check(call(133, 0), "outside the group again: rows are replaced");
  cumem_cases();
  registered_cases();
  larger_buffer_cases();
  span_cases();
  dccl_lazy_map_free(&comm);
  check(w.opens == w.closes, "freed: every mapping closed (%d opened, %d closed)", w.opens, w.closes);
  check(w.part_gathers == 7, "the parts were gathered at the 7 calls with spans only (%d)", w.part_gathers);
  check(w.reserves == w.frees && w.maps == w.unmaps, "freed: every mirror unmapped (%d of %d parts) and freed (%d of "
        "%d)", w.unmaps, w.maps, w.frees, w.reserves);
  printf("lazy_map_rows: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
