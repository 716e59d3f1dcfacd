/* Output: the header and table rows in nccl-tests' layout (rank 0 prints), and the same rows as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* One column layout, used for the header and the rows alike so they always line up. */
#define ROW_LEAD_FMT "%12s  %12s  %8s  %6s  %6s"
#define HEAD_LEAD_FMT "#%11s  %12s  %8s  %6s  %6s" /* the same widths, the first one holding the '#' */
#define BLOCK_WIDTH 36
#define MPI_WIDTH 30
#define BLOCK_FMT "  %8s  %7s  %7s  %6s"
#define MPI_FMT "  %8s  %8s  %8s"

static const char *const average_names[] = {"rank 0", "mean over ranks", "min over ranks", "max over ranks"};

static void print_centered(const char *text, int width) {
  int len = (int)strlen(text), left = (width - len) / 2;
  printf("%*s%s%*s", left, "", text, width - len - left, "");
}

void perf_print_header(const struct perf_options *o, const struct perf_collective *coll, const char *bootstrap,
                       int device, MPI_Comm comm) {
  int rank, nranks;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);

  /* Every rank reports its host and pid; rank 0 prints them in order. */
  struct {
    int pid, device;
    char host[64];
  } me, *all = NULL;
  memset(&me, 0, sizeof me);
  me.pid = (int)getpid();
  me.device = device;
  gethostname(me.host, sizeof me.host - 1);
  if (rank == 0) all = calloc((size_t)nranks, sizeof *all);
  MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, comm);
  if (rank != 0) return;

  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) version = 0;
  char step[64];
  if (o->step_factor > 1.0)
    snprintf(step, sizeof step, "%g(factor)", o->step_factor);
  else
    snprintf(step, sizeof step, "%zu(bytes)", o->step_bytes);
  printf("# %s_perf: DCCL %d.%d.%d, NCCL API %d, %s buffers\n", coll->name, DCCL_MAJOR, DCCL_MINOR, DCCL_PATCH,
         version, device >= 0 ? "device" : "host");
  printf(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: 1 "
      "validation: %d graph: 0\n",
      o->min_bytes, o->max_bytes, step, o->warmup_iters, o->iters, o->check);
  printf("# times: %s%s\n", average_names[o->average],
         o->mpi_baseline ? "; MPI baseline: the same operation through MPI, out-of-place" : "");
  printf("#\n# Using devices\n");
  for (int r = 0; r < nranks; r++)
    printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s]\n", r, all[r].pid, all[r].host, all[r].device,
           all[r].device >= 0 ? "GPU" : "host");
  printf("#\n# communicator: %s\n#\n", bootstrap);
  free(all);

  printf(HEAD_LEAD_FMT, "", "", "", "", "");
  print_centered("out-of-place", BLOCK_WIDTH);
  print_centered("in-place", BLOCK_WIDTH);
  if (o->mpi_baseline) print_centered("MPI baseline", MPI_WIDTH);
  printf("\n");
  printf(HEAD_LEAD_FMT BLOCK_FMT BLOCK_FMT, "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
         "#wrong", "time", "algbw", "busbw", "#wrong");
  if (o->mpi_baseline) printf(MPI_FMT, "mpi time", "dccl/mpi", "bw ratio");
  printf("\n");
  printf(HEAD_LEAD_FMT BLOCK_FMT BLOCK_FMT, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
         "(GB/s)", "(GB/s)", "");
  if (o->mpi_baseline) printf(MPI_FMT, "(us)", "(time)", "(algbw)");
  printf("\n");
  fflush(stdout);
}

static void format_time(char *buf, size_t len, double us) {
  snprintf(buf, len, us < 1e5 ? "%.2f" : "%.0f", us);
}

static void format_block(const struct perf_result *r, char *t, char *a, char *b, char *w, size_t len) {
  format_time(t, len, r->time_us);
  snprintf(a, len, "%.2f", r->algbw);
  snprintf(b, len, "%.2f", r->busbw);
  if (r->wrong < 0)
    snprintf(w, len, "N/A");
  else
    snprintf(w, len, "%lld", r->wrong);
}

void perf_print_row(const struct perf_row *row) {
  char size[32], count[32], root[16];
  snprintf(size, sizeof size, "%zu", row->bytes);
  snprintf(count, sizeof count, "%zu", row->count);
  snprintf(root, sizeof root, "%d", row->root);
  printf(ROW_LEAD_FMT, size, count, row->type, row->redop, root);
  const struct perf_result *blocks[2] = {&row->out_of_place, &row->in_place};
  for (int i = 0; i < 2; i++) {
    char t[32], a[32], b[32], w[32];
    format_block(blocks[i], t, a, b, w, sizeof t);
    printf(BLOCK_FMT, t, a, b, w);
  }
  if (row->has_mpi) {
    if (row->mpi_ok) {
      char t[32], ratio[32], bw[32];
      format_time(t, sizeof t, row->mpi_time_us);
      snprintf(ratio, sizeof ratio, "%.3f", row->mpi_time_us > 0 ? row->out_of_place.time_us / row->mpi_time_us : 0);
      snprintf(bw, sizeof bw, "%.3f", row->mpi_algbw > 0 ? row->out_of_place.algbw / row->mpi_algbw : 0);
      printf(MPI_FMT, t, ratio, bw);
    } else {
      printf(MPI_FMT, "n/a", "n/a", "n/a");
    }
  }
  printf("\n");
  fflush(stdout);
}

/* ---- JSON ---- */
static FILE *json_file;
static int json_fd = -1; /* json_file's descriptor, for perf_json_abort */
static int json_rows;

extern char **environ;

static void json_string(const char *text) {
  fputc('"', json_file);
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(json_file, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(json_file, "\\u%04x", *p);
    else
      fputc(*p, json_file);
  }
  fputc('"', json_file);
}

/* The library's settings are the DCCL_ and NCCL_ variables (DCCL reads both names); an empty one is unset.
 * Returns the value of such an environment entry, else NULL. */
static const char *setting_value(const char *entry) {
  if (strncmp(entry, "DCCL_", 5) != 0 && strncmp(entry, "NCCL_", 5) != 0) return NULL;
  const char *eq = strchr(entry, '=');
  return eq && eq[1] ? eq + 1 : NULL;
}

/* Logging settings change no timing worth a line of its own in a plot, so the label leaves them out. */
static int is_debug_setting(const char *entry) {
  return strncmp(entry + 5, "DEBUG", 5) == 0;
}

static void json_env(void) {
  fputs("  \"env\": {", json_file);
  int n = 0;
  for (char **e = environ; *e; e++) {
    const char *value = setting_value(*e);
    if (!value) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(value - 1 - *e), *e);
    fputs(n++ ? ", " : "", json_file);
    json_string(name);
    fputs(": ", json_file);
    json_string(value);
  }
  fputs("},\n", json_file);
}

/* "dccl", then each setting that is not about logging, e.g. "dccl DCCL_ALGO=ring". */
static void json_label(void) {
  char label[1024] = "dccl";
  size_t len = strlen(label);
  for (char **e = environ; *e && len < sizeof label; e++)
    if (setting_value(*e) && !is_debug_setting(*e)) len += (size_t)snprintf(label + len, sizeof label - len, " %s", *e);
  json_string(label);
}

/* The MPI library's name and version: its version string up to the first comma ("Open MPI v4.1.4"). */
static void json_mpi_library(void) {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "mpi");
  text[strcspn(text, ",\n")] = '\0';
  json_string(text);
}

int perf_json_open(const char *path, const struct perf_options *o, const struct perf_collective *coll, int nranks,
                   int on_device) {
  json_file = fopen(path, "w");
  if (!json_file) return -1;
  json_fd = fileno(json_file);
  char date[32], host[64] = "";
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  gethostname(host, sizeof host - 1);
  fprintf(json_file, "{\n  \"tool\": \"%s_perf\",\n  \"collective\": \"%s\",\n  \"library\": \"dccl\",\n", coll->name,
          coll->name);
  fprintf(json_file, "  \"version\": \"%d.%d.%d\",\n  \"label\": ", DCCL_MAJOR, DCCL_MINOR, DCCL_PATCH);
  json_label();
  fprintf(json_file, ",\n  \"nranks\": %d,\n  \"date\": \"%s\",\n  \"host\": ", nranks, date);
  json_string(host);
  static const char *buffers[3] = {"plain", "registered", "windows"};
  fprintf(json_file, ",\n  \"memory\": \"%s\",\n  \"buffers\": \"%s\",\n", on_device ? "device" : "host",
          on_device ? buffers[o->register_mode] : "plain");
  if (on_device)
    fprintf(json_file, "  \"allocator\": \"%s\",\n",
            o->memalloc == PERF_ALLOC_MEMALLOC   ? "ncclMemAlloc"
            : o->memalloc == PERF_ALLOC_SEGMENTS ? "segments"
            : o->memalloc == PERF_ALLOC_EXACT    ? "cudaMalloc, exact sizes"
                                                 : "cudaMalloc, 2 MiB pages");
  fprintf(json_file, "  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"check\": %d,\n", o->iters, o->warmup_iters,
          o->check);
  fprintf(json_file, "  \"times\": \"%s\",\n", average_names[o->average]);
  json_env();
  fputs("  \"mpi_library\": ", json_file);
  if (o->mpi_baseline)
    json_mpi_library();
  else
    fputs("null", json_file);
  fputs(",\n  \"rows\": [", json_file);
  json_rows = 0;
  return 0;
}

static void json_result(const char *key, const struct perf_result *r) {
  fprintf(json_file, ", \"%s\": {\"time_us\": %.4f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, \"wrong\": ", key,
          r->time_us, r->algbw, r->busbw);
  if (r->wrong < 0)
    fputs("null}", json_file);
  else
    fprintf(json_file, "%lld}", r->wrong);
}

void perf_json_row(const struct perf_row *row) {
  if (!json_file) return;
  fprintf(json_file,
          "%s\n    {\"collective\": \"%s\", \"nranks\": %d, \"size_bytes\": %zu, \"count\": %zu, \"type\": \"%s\", "
          "\"redop\": \"%s\", \"root\": %d",
          json_rows++ ? "," : "", row->collective, row->nranks, row->bytes, row->count, row->type, row->redop,
          row->root);
  json_result("out_of_place", &row->out_of_place);
  json_result("in_place", &row->in_place);
  if (row->has_mpi) {
    if (row->mpi_ok)
      fprintf(json_file,
              ", \"mpi\": {\"time_us\": %.4f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, \"time_ratio\": %.6f, "
              "\"algbw_ratio\": %.6f}",
              row->mpi_time_us, row->mpi_algbw, row->mpi_busbw,
              row->mpi_time_us > 0 ? row->out_of_place.time_us / row->mpi_time_us : 0.0,
              row->mpi_algbw > 0 ? row->out_of_place.algbw / row->mpi_algbw : 0.0);
    else
      fputs(", \"mpi\": null", json_file);
  }
  fputs("}", json_file);
  fflush(json_file);
}

void perf_json_abort(void) {
  /* From a signal handler: only write(2). Rows are flushed whole, so the file ends at a row's end. */
  static const char tail[] = "\n  ],\n  \"aborted\": \"the -T timeout expired before the last size\"\n}\n";
  if (json_fd >= 0 && write(json_fd, tail, sizeof tail - 1) < 0) json_fd = -1;
}

void perf_json_close(void) {
  if (!json_file) return;
  fputs("\n  ]\n}\n", json_file);
  fclose(json_file);
  json_file = NULL;
  json_fd = -1;
}
