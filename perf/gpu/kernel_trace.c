/* kernel_trace: where a small collective's time goes, without changing the library or the program. A CUPTI
 * injection library: a program run with CUDA_INJECTION64_PATH=.../libdccl_kernel_trace.so has the CUDA driver call
 * InitializeInjection at cuInit, which turns on CUPTI's activity records for kernels (queued, submitted, start and
 * end, with the launch's correlation id) and for the driver and runtime calls that launch, synchronise or replay a
 * graph. Every record goes, as CUPTI hands its buffers back, to one line of $KERNEL_TRACE_DIR/trace.PID.tsv (/tmp by
 * default); perf/kernel_trace_report.py lines up the processes' and streams' records and prints the medians.
 * Timestamps are CUPTI's (nanoseconds, one host clock for every process of the machine).
 * Lines: "K stream corr graph queued submitted start end name" and "A domain name corr start end thread". */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUFFER_BYTES (8u << 20)

static FILE *out;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = aligned_alloc(8, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
  *max_records = 0; /* as many as fit */
}

/* Only the calls that put work on a stream or wait for it: the rest would drown them. */
static int interesting(const char *name) {
  return strstr(name, "Launch") || strstr(name, "Synchronize"); /* graph launches included */
}

static void write_api(const CUpti_ActivityAPI *a, CUpti_CallbackDomain domain) {
  const char *name = NULL;
  if (cuptiGetCallbackName(domain, a->cbid, &name) != CUPTI_SUCCESS || !name || !interesting(name)) return;
  fprintf(out, "A\t%c\t%s\t%u\t%llu\t%llu\t%u\n", domain == CUPTI_CB_DOMAIN_DRIVER_API ? 'D' : 'R', name,
          a->correlationId, (unsigned long long)a->start, (unsigned long long)a->end, a->threadId);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *record = NULL;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
      fprintf(out, "K\t%u\t%u\t%u\t%llu\t%llu\t%llu\t%llu\t%s\n", k->streamId, k->correlationId, k->graphId,
              (unsigned long long)k->queued, (unsigned long long)k->submitted, (unsigned long long)k->start,
              (unsigned long long)k->end, k->name ? k->name : "?");
    } else if (record->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      write_api((const CUpti_ActivityAPI *)record, CUPTI_CB_DOMAIN_DRIVER_API);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      write_api((const CUpti_ActivityAPI *)record, CUPTI_CB_DOMAIN_RUNTIME_API);
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped && out)
    fprintf(out, "# dropped %zu records\n", dropped);
  free(buffer);
}

static void flush_at_exit(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (out) fclose(out);
  out = NULL;
}

static int enable(CUpti_ActivityKind kind, const char *what) {
  CUptiResult r = cuptiActivityEnable(kind);
  if (r == CUPTI_SUCCESS) return 1;
  const char *why = NULL;
  cuptiGetResultString(r, &why);
  fprintf(stderr, "kernel_trace: cannot record %s: %s\n", what, why ? why : "?");
  return 0;
}

int InitializeInjection(void) {
  const char *dir = getenv("KERNEL_TRACE_DIR");
  char path[4096];
  snprintf(path, sizeof(path), "%s/trace.%d.tsv", dir && *dir ? dir : "/tmp", (int)getpid());
  if (!(out = fopen(path, "w"))) {
    perror(path);
    return 0;
  }
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  fprintf(out, "# pid %d rank %s\n", (int)getpid(), rank ? rank : "-1");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    fprintf(stderr, "kernel_trace: cuptiActivityRegisterCallbacks failed\n");
    return 0;
  }
  cuptiActivityEnableLatencyTimestamps(1); /* a kernel's queued and submitted times */
  int ok = enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels");
  ok &= enable(CUPTI_ACTIVITY_KIND_DRIVER, "driver calls");
  ok &= enable(CUPTI_ACTIVITY_KIND_RUNTIME, "runtime calls");
  atexit(flush_at_exit);
  return ok;
}
