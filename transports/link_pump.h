/* The link pump: a proxy thread (src/proxy/proxy.h) that progresses links whose transport moves the bytes
 * (sockets) but whose FIFOs kernels fill and drain, so no caller's wait ever calls their progress(). It spins
 * while its owner has device work in flight (the `busy` hook) and while bytes move, and otherwise sleeps until a
 * launch kicks it; it sleeps at most `poll_us` at a time while a send link holds slots its socket had no room for
 * (a peer's kernel may wait for them) and once a CUDA graph holds some of the owner's work
 * (dccl_link_pump_expect_replays), whose replays start kernels the host never hears of. A link that breaks is reported once
 * through the `failed` hook (the error's text is then dccl_last_error()); a failure elsewhere (the `gave_up` hook)
 * stops it too. */
#ifndef DCCL_LINK_PUMP_H_
#define DCCL_LINK_PUMP_H_

#include <stdatomic.h>

#include "transports/transport.h"

struct dccl_link_pump_hooks {
  int (*busy)(void *arg);                      /* 1: device work is in flight; may be NULL */
  void (*failed)(void *arg, ncclResult_t res); /* a link broke (called on the pump's thread, once) */
  /* Asked before every pass: 1 when the owner failed for another reason (a kernel gave up, an abort),
   * after which the pump moves nothing more; the owner aborts the links, so their peers notice (a kernel's abort
   * word lives in this side's FIFO and does not cross the network). May be NULL. */
  int (*gave_up)(void *arg);
  void *arg;
};

struct dccl_link_pump;

/* A pump with no links and no thread yet. */
ncclResult_t dccl_link_pump_create(struct dccl_link_pump **out, const struct dccl_link_pump_hooks *hooks, int poll_us,
                                   int oversubscribed);
/* Adds a connected link; the first one starts the thread. */
ncclResult_t dccl_link_pump_add(struct dccl_link_pump *p, struct dccl_conn *c);
/* Work was just queued (a launch): a sleeping pump looks at once. Any thread; a NULL pump is fine. */
void dccl_link_pump_kick(struct dccl_link_pump *p);
/* Work may now start unannounced (a graph captured some): from now on the pump looks every poll_us. Any thread. */
void dccl_link_pump_expect_replays(struct dccl_link_pump *p);
/* Stops the thread, then keeps moving what the send links still hold (the peers' kernels may wait for it) until
 * every one has left this process, `flush_s` seconds have passed, or *abort_flag is set; frees the pump. The
 * links themselves stay (their transport closes them). NULL is fine. */
void dccl_link_pump_free(struct dccl_link_pump *p, double flush_s, _Atomic int *abort_flag);

#endif
