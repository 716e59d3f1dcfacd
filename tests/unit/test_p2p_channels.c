/* A send/recv's channels (collectives/plan.c, DCCL_DEV_P2P_NCHANNELS=8 here): host buffers take one channel on lane
 * DCCL_LANE_P2P; device buffers one per MiB, at most 8, channel c on lane DCCL_LANE_DEVICE + DCCL_LANE_P2P + c.
 * Checked for sizes from 0 to 64 MiB and odd counts: the ranges are contiguous, cover [0, count) once, each a
 * multiple of 64 elements but the last; the send and its receive (same bytes) plan the same channels; the links
 * asked for are one per channel (both ends agree). `test_p2p_channels default` (the variable unset: 1) checks that
 * every device send is one channel on the device lane, as before. The channels are clamped so an all-to-all's group
 * (2 (n - 1) lanes a channel) fits the communicator's device channels. The kernels' CTAs per channel are dev_exec.c's
 * (run on the GPU). */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll_comm.h"
#include "collectives/op.h"
#include "unit_check.h"

static int host_proto(const struct dccl_coll_comm *c, int kind, size_t bytes) {
  (void)c, (void)kind, (void)bytes;
  return DCCL_PROTO_BULK;
}

static void plan(struct dccl_op *op, struct dccl_coll_comm *comm, int kind, uint64_t count, int on_device) {
  memset(op, 0, sizeof(*op));
  op->comm = comm;
  op->kind = kind;
  op->count = count;
  op->type = ncclFloat32;
  op->esize = 4;
  op->root = -1;
  op->peer = 1;
  op->on_device = on_device;
  op->send_win = op->recv_win = -1;
  check(dccl_op_plan(op) == ncclSuccess, "plan %llu elements", (unsigned long long)count);
}

int main(int argc, char **argv) {
  struct dccl_coll_comm comm;
  memset(&comm, 0, sizeof(comm));
  comm.nranks = 2;
  comm.rank = 0;
  comm.pick_proto = host_proto;
  comm.dev_nchannels = 64; /* 2 ranks: room for 32 channels each way */
  static struct dccl_op send, recv;
  if (argc > 1 && !strcmp(argv[1], "default")) {
    plan(&send, &comm, DCCL_OP_SEND, 64 << 20, 1);
    check(send.nchannels == 1 && send.ch[0].lane == DCCL_LANE_DEVICE + DCCL_LANE_P2P &&
              dccl_p2p_nchannels(&comm, 1, UINT64_MAX) == 1,
          "by default a 256 MiB device send is one channel (got %d)", send.nchannels);
    printf("test_p2p_channels default: %d passed, %d failed\n", checks_passed, checks_failed);
    return checks_failed ? 1 : 0;
  }
  setenv("DCCL_DEV_P2P_NCHANNELS", "8", 1);

  plan(&send, &comm, DCCL_OP_SEND, 16 << 20, 0);
  check(send.nchannels == 1 && send.ch[0].lane == DCCL_LANE_P2P && send.ch[0].sched.count == 16 << 20,
        "host buffers: one channel on lane %d (got %d channels, lane %d)", DCCL_LANE_P2P, send.nchannels,
        send.ch[0].lane);

  static const uint64_t counts[] = {0, 2, 262144, 262145, 786432, 1000003, 4194304, 16777216};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    uint64_t count = counts[i], bytes = count * 4;
    int want = bytes >> 20 < 1 ? 1 : bytes >> 20 > 8 ? 8 : (int)(bytes >> 20);
    plan(&send, &comm, DCCL_OP_SEND, count, 1);
    plan(&recv, &comm, DCCL_OP_RECV, count, 1);
    check(send.nchannels == want && recv.nchannels == want && dccl_p2p_nchannels(&comm, 1, bytes) == want,
          "%llu bytes: %d channels, want %d (the receive: %d)", (unsigned long long)bytes, send.nchannels, want,
          recv.nchannels);
    uint64_t next = 0;
    int steps = 1;
    for (int c = 0; c < send.nchannels; c++) {
      const struct dccl_op_channel *s = &send.ch[c], *r = &recv.ch[c];
      check(s->lane == DCCL_LANE_DEVICE + DCCL_LANE_P2P + c && r->lane == s->lane, "%llu bytes: channel %d on lane %d",
            (unsigned long long)bytes, c, s->lane);
      check(s->sched.begin == next && r->sched.begin == s->sched.begin && r->sched.count == s->sched.count,
            "%llu bytes: channel %d begins at %llu, want %llu (the receive alike)", (unsigned long long)bytes, c,
            (unsigned long long)s->sched.begin, (unsigned long long)next);
      check(c == send.nchannels - 1 || s->sched.count % 64 == 0, "%llu bytes: channel %d holds %llu elements",
            (unsigned long long)bytes, c, (unsigned long long)s->sched.count);
      check(s->send_peer[0] == 1 && r->recv_peer[0] == 1, "%llu bytes: channel %d names peer 1",
            (unsigned long long)bytes, c);
      steps &= count == 0 || (s->nsteps[0] > 0 && r->nsteps[0] > 0);
      next += s->sched.count;
    }
    check(next == count && steps, "%llu bytes: the channels cover %llu of %llu elements, every one with steps",
          (unsigned long long)bytes, (unsigned long long)next, (unsigned long long)count);
    struct dccl_conn_req *reqs = NULL;
    int n = 0, cap = 0;
    check(dccl_op_conn_reqs(&send, &reqs, &n, &cap) == ncclSuccess, "links");
    int ok = n == (count ? want : 0);
    for (int k = 0; k < n && ok; k++)
      ok = reqs[k].peer == 1 && reqs[k].is_send && reqs[k].lane == DCCL_LANE_DEVICE + DCCL_LANE_P2P + k;
    check(ok, "%llu bytes: %d links asked, one per channel", (unsigned long long)bytes, n);
    free(reqs);
  }
  check(dccl_p2p_nchannels(&comm, 1, UINT64_MAX) == 8 && dccl_p2p_nchannels(&comm, 0, UINT64_MAX) == 1,
        "the most: 8 on the device, 1 on the host");
  /* An all-to-all's group opens 2 (n - 1) lanes a channel: n ranks on one H200 (132 CTAs) agree on 132 / n device
   * channels, so 4 ranks take at most 33 / 6 = 5 channels, 8 ranks 16 / 14 = 1; every rank plans alike. */
  static const struct { int nranks, dev_nchannels, want; } fits[] = {{2, 66, 8}, {4, 33, 5}, {8, 16, 1}, {3, 3, 1}};
  for (size_t i = 0; i < sizeof(fits) / sizeof(fits[0]); i++) {
    comm.nranks = fits[i].nranks;
    comm.dev_nchannels = fits[i].dev_nchannels;
    plan(&send, &comm, DCCL_OP_SEND, 64 << 20, 1);
    check(send.nchannels == fits[i].want && dccl_p2p_nchannels(&comm, 1, UINT64_MAX) == fits[i].want,
          "%d ranks, %d device channels: a 256 MiB send takes %d channels, want %d", fits[i].nranks,
          fits[i].dev_nchannels, send.nchannels, fits[i].want);
  }
  printf("test_p2p_channels: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
