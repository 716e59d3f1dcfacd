/* Which kernel runs a launch (collectives/device/kernel_choice.h): the LL kernel of the type only where every task
 * runs LL steps on one stream (the LL kernel has no second stream, no bulk steps, no direct path: a tree or a bulk
 * task there would hang or lose data), the generic kernel of the type otherwise, the one for any type for a mix;
 * the tiny kernel only for one small one-shot per CTA (it runs nothing else); and the names the host asks the
 * module for. */
#include <stdio.h>
#include <string.h>

#include "unit_check.h"

#ifdef DCCL_HAVE_DEVICE_CODE
#include "collectives/device/kernel_choice.h"
#include "pure/reduce_math.h"

static struct dccl_dev_task task(uint32_t proto, enum dccl_sched_algo algo, uint64_t nsteps1) {
  struct dccl_dev_task t;
  memset(&t, 0, sizeof(t));
  t.proto = proto;
  t.sched.algo = algo;
  t.nsteps[0] = 2;
  t.nsteps[1] = nsteps1;
  return t;
}

static void choices(void) {
  const int f32 = DCCL_ELEM_F32;
  struct dccl_dev_task ll_ring = task(DCCL_PROTO_LL, DCCL_SCHED_RING_ALLREDUCE, 0);
  struct dccl_dev_task ll_oneshot = task(DCCL_PROTO_LL, DCCL_SCHED_ONESHOT_ALLREDUCE, 0);
  struct dccl_dev_task ll_tree = task(DCCL_PROTO_LL, DCCL_SCHED_TREE_ALLREDUCE, 3);
  struct dccl_dev_task bulk_ring = task(DCCL_PROTO_BULK, DCCL_SCHED_RING_ALLREDUCE, 0);
  struct dccl_dev_task ll_direct = task(DCCL_PROTO_LL, DCCL_SCHED_DIRECT, 0);

  struct dccl_dev_task all_ll[] = {ll_oneshot, ll_ring, ll_oneshot};
  check(dccl_kernel_for(f32, all_ll, 3) == DCCL_KERNEL_LL(f32), "LL one-shot and ring tasks: the LL kernel (got %d)",
        dccl_kernel_for(f32, all_ll, 3));
  check(dccl_kernel_for(DCCL_ELEM_I8, all_ll, 1) == DCCL_KERNEL_LL(DCCL_ELEM_I8), "int8: its own LL kernel");
  check(dccl_kernel_for(DCCL_ELEM_E5M2, all_ll, 1) == DCCL_KERNEL_TINY(0) - 1, "the last type's LL kernel is the last");

  struct dccl_dev_task with_tree[] = {ll_oneshot, ll_tree};
  check(dccl_kernel_for(f32, with_tree, 2) == f32, "a tree's two streams: the generic kernel (got %d)",
        dccl_kernel_for(f32, with_tree, 2));
  struct dccl_dev_task with_bulk[] = {bulk_ring, ll_ring};
  check(dccl_kernel_for(f32, with_bulk, 2) == f32, "a bulk task among LL ones: the generic kernel (got %d)",
        dccl_kernel_for(f32, with_bulk, 2));
  check(dccl_kernel_for(f32, &ll_direct, 1) == f32, "the direct path: the generic kernel (got %d)",
        dccl_kernel_for(f32, &ll_direct, 1));
  check(dccl_kernel_for(DCCL_KERNEL_ANY, all_ll, 3) == DCCL_KERNEL_ANY, "mixed types: the kernel for any type");
  check(dccl_kernel_for(-1, all_ll, 3) == DCCL_KERNEL_ANY, "no type: the kernel for any type");
  check(dccl_kernel_generic(f32) == f32, "a copy-engine launch of float32: its generic kernel");
  check(dccl_kernel_generic(DCCL_KERNEL_ANY) == DCCL_KERNEL_ANY, "a copy-engine launch mixing types: any type");
}

/* The tiny kernel: one small one-shot per CTA b, task b, in the parameter, from an LL kernel; anything else keeps
 * the kernel it was given. */
static void tiny(void) {
  /* Two CTAs: the slim tiny kernel (at most DCCL_DEV_SLIM_CTAS); slim() below takes more. */
  const int ll = DCCL_KERNEL_LL(DCCL_ELEM_F32), tk = DCCL_KERNEL_SLIM(DCCL_ELEM_F32);
  static struct dccl_dev_work w;
  memset(&w, 0, sizeof(w));
  struct dccl_dev_task t = task(DCCL_PROTO_LL, DCCL_SCHED_ONESHOT_ALLREDUCE, 0);
  t.esize = 4;
  t.sched.count = 2;
  t.sched.npeers = 1;
  w.ntasks = w.nctas = 2; /* two ranks' CTAs of a shared launch */
  w.cta_first[1] = 1;
  w.cta_ntasks[0] = w.cta_ntasks[1] = 1;
  w.inline_tasks[0] = w.inline_tasks[1] = t;
  check(dccl_kernel_tiny(ll, &w) == tk, "two 8-byte one-shots, a CTA each: the tiny kernel (got %d)",
        dccl_kernel_tiny(ll, &w));
  check(dccl_kernel_tiny(DCCL_KERNEL_LL(DCCL_ELEM_BF16), &w) == DCCL_KERNEL_SLIM(DCCL_ELEM_BF16),
        "bf16's LL kernel: bf16's tiny kernel");
  check(dccl_kernel_tiny(DCCL_ELEM_F32, &w) == DCCL_ELEM_F32, "the generic kernel stays");
  check(dccl_kernel_tiny(DCCL_KERNEL_ANY, &w) == DCCL_KERNEL_ANY, "so does the kernel for any type");
  check(dccl_kernel_tiny(tk, &w) == tk, "a tiny kernel is not asked again");
  w.inline_tasks[1].sched.count = DCCL_DEV_TINY_BYTES / 4;
  check(dccl_kernel_tiny(ll, &w) == tk, "%d bytes: still tiny", DCCL_DEV_TINY_BYTES);
  w.inline_tasks[1].sched.count++;
  check(dccl_kernel_tiny(ll, &w) == ll, "one element past %d bytes: the LL kernel", DCCL_DEV_TINY_BYTES);
  w.inline_tasks[1] = t;
  w.inline_tasks[1].nsteps[0] = 4;
  check(dccl_kernel_tiny(ll, &w) == ll, "two chunks: the LL kernel");
  w.inline_tasks[1] = t;
  w.inline_tasks[1].sched.algo = DCCL_SCHED_RING_ALLREDUCE;
  check(dccl_kernel_tiny(ll, &w) == ll, "an LL ring: the LL kernel");
  w.inline_tasks[1] = t;
  w.inline_tasks[1].sched.npeers = DCCL_DEV_CONN_SLOTS + 1;
  check(dccl_kernel_tiny(ll, &w) == ll, "more peers than links: the LL kernel");
  w.inline_tasks[1] = t;
  w.cta_ntasks[0] = 2;
  w.cta_ntasks[1] = 0;
  check(dccl_kernel_tiny(ll, &w) == ll, "two tasks on one CTA: the LL kernel");
  w.cta_ntasks[0] = w.cta_ntasks[1] = 1;
  w.cta_first[1] = 0;
  check(dccl_kernel_tiny(ll, &w) == ll, "CTA 1 on task 0 (the tiny kernel runs task b on CTA b): the LL kernel");
  w.cta_first[1] = 1;
  w.tasks = &t;
  check(dccl_kernel_tiny(ll, &w) == ll, "tasks in host memory: the LL kernel");
  w.tasks = NULL;
  check(dccl_kernel_tiny(ll, &w) == tk, "and back: tiny");
}

/* Past DCCL_DEV_SLIM_CTAS CTAs the tiny kernel takes the whole launch; up to it, the slim parameter holds every
 * CTA's task, rank slot and words. */
static void slim(void) {
  static struct dccl_dev_work w;
  static uint32_t words[3][3];
  memset(&w, 0, sizeof(w));
  struct dccl_dev_task t = task(DCCL_PROTO_LL, DCCL_SCHED_ONESHOT_ALLREDUCE, 0);
  t.esize = 4;
  t.sched.count = 2;
  t.sched.npeers = 2;
  w.ntasks = w.nctas = 3; /* three ranks' CTAs of a shared launch */
  for (int b = 0; b < 3; b++) {
    w.cta_first[b] = (uint16_t)b;
    w.cta_ntasks[b] = 1;
    w.cta_rank[b] = (uint8_t)b;
    w.inline_tasks[b] = t;
    w.inline_tasks[b].rank = b;
    w.rank[b].abort_flag = &words[b][0];
    w.rank[b].done_ctas = &words[b][1];
    w.rank[b].ctas = 1;
  }
  const int ll = DCCL_KERNEL_LL(DCCL_ELEM_I32);
  check(dccl_kernel_tiny(ll, &w) == DCCL_KERNEL_TINY(DCCL_ELEM_I32), "3 CTAs: the tiny kernel of the whole launch");
  w.ntasks = w.nctas = 2;
  check(dccl_kernel_tiny(ll, &w) == DCCL_KERNEL_SLIM(DCCL_ELEM_I32), "2 CTAs: the slim one");
  check(dccl_kernel_tiny(DCCL_KERNEL_SLIM(DCCL_ELEM_I32), &w) == DCCL_KERNEL_SLIM(DCCL_ELEM_I32),
        "a slim kernel is not asked again");
  struct dccl_dev_slim_work s;
  memset(&s, 0xff, sizeof(s));
  dccl_dev_slim_of(&w, &s);
  for (int b = 0; b < 2; b++) {
    check(s.inline_tasks[b].rank == b && s.inline_tasks[b].sched.npeers == 2 && s.inline_tasks[b].esize == 4,
          "CTA %d's task in the slim parameter", b);
    check(s.cta_rank[b] == b && s.rank[b].abort_flag == &words[b][0] && s.rank[b].done_ctas == &words[b][1] &&
              s.rank[b].ctas == 1, "CTA %d's rank slot and words", b);
  }
  w.ntasks = w.nctas = 1;
  dccl_dev_slim_of(&w, &s);
  check(s.rank[1].abort_flag == NULL && s.cta_rank[1] == 0, "one CTA: the second slot left empty");
}

static void names(void) {
  char name[32];
  dccl_kernel_name(0, name, sizeof(name));
  check(strcmp(name, "dccl_kernel_t0") == 0, "kernel 0: %s", name);
  dccl_kernel_name(DCCL_ELEM_F32, name, sizeof(name));
  check(strcmp(name, "dccl_kernel_t7") == 0, "float32's generic kernel (type 7): %s", name);
  dccl_kernel_name(DCCL_KERNEL_ANY, name, sizeof(name));
  check(strcmp(name, "dccl_kernel_any") == 0, "the kernel for any type: %s", name);
  dccl_kernel_name(DCCL_KERNEL_SLIM(DCCL_ELEM_F32), name, sizeof(name));
  check(strcmp(name, "dccl_kernel_slim_t7") == 0, "float32's slim tiny kernel: %s", name);
  dccl_kernel_name(DCCL_NKERNELS - 1, name, sizeof(name));
  check(strcmp(name, "dccl_kernel_slim_t11") == 0, "the last kernel: %s", name);
  dccl_kernel_name(DCCL_KERNEL_LL(0), name, sizeof(name));
  check(strcmp(name, "dccl_kernel_ll_t0") == 0, "the first LL kernel: %s", name);
  dccl_kernel_name(DCCL_KERNEL_LL(DCCL_KERNEL_NTYPES - 1), name, sizeof(name));
  check(strcmp(name, "dccl_kernel_ll_t11") == 0, "the last LL kernel: %s", name);
  dccl_kernel_name(DCCL_KERNEL_TINY(DCCL_ELEM_F32), name, sizeof(name));
  check(strcmp(name, "dccl_kernel_tiny_t7") == 0, "float32's tiny kernel: %s", name);
  dccl_kernel_name(DCCL_KERNEL_SLIM(0) - 1, name, sizeof(name));
  check(strcmp(name, "dccl_kernel_tiny_t11") == 0, "the last tiny kernel: %s", name);
}
#endif

int main(void) {
#ifdef DCCL_HAVE_DEVICE_CODE
  choices();
  tiny();
  slim();
  names();
  printf("test_kernel_choice: %d passed, %d failed\n", checks_passed, checks_failed);
  return checks_failed != 0;
#else
  (void)check;
  printf("test_kernel_choice: no device code in this build\n");
  return 77;
#endif
}
