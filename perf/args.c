/* Command-line flags, with the meanings nccl-tests gives them, plus -J (JSON), -M (MPI baseline) and -B (how
 * the communicator is bootstrapped). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

static void usage(const char *prog) {
  printf(
      "Usage: mpirun -np N %s [options]\n"
      "  -b, --minbytes <size>        smallest size (K/M/G suffixes, powers of 1024; default 32M)\n"
      "  -e, --maxbytes <size>        largest size (default 32M)\n"
      "  -i, --stepbytes <size>       additive step between sizes (default 1M)\n"
      "  -f, --stepfactor <factor>    multiplicative step; overrides -i when > 1\n"
      "  -n, --iters <n>              timed iterations per size (default 20)\n"
      "  -w, --warmup_iters <n>       untimed iterations before timing (default 1)\n"
      "  -c, --check <n>              verify every element of n iterations after timing (0: no check; default 1)\n"
      "  -o, --op <op>                sum, prod, min, max, avg, mulsum or all (default sum)\n"
      "  -d, --datatype <type>        int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
      "                               f8e4m3 f8e5m2, or all (default float)\n"
      "  -r, --root <rank>            root of broadcast, reduce, gather and scatter, or all (default 0)\n"
      "  -a, --average <0|1|2|3>      per-rank times reported as: rank 0, mean, min, max (default 1)\n"
      "  -t, --nthreads 1  -g, --ngpus 1  -z, --blocking 0   accepted for compatibility (one rank per process)\n"
      "  -J, --json <file>            also write the run as JSON: its metadata and rows (docs/performance.md)\n"
      "      --host                   host buffers even where a GPU is present (default: device buffers there)\n"
      "  -M, --mpi_baseline <0|1>     also time the same operation through MPI (out-of-place)\n"
      "  -T, --timeout <seconds>      abort the run after this long (default: never)\n"
      "  -B, --bootstrap <mpi|uid>    communicator from dcclCommInitMPI, or ncclGetUniqueId + MPI_Bcast\n"
      "  -R, --local_register <0|1|2> device buffers: 1 ncclCommRegister, 2 windows (ncclCommWindowRegister, which\n"
      "                               ranks of one GPU in several processes read in place); default 0\n"
      "      --memalloc               device buffers from ncclMemAlloc (cuMem) instead of cudaMalloc\n"
      "      --segments               device buffers in reserved ranges of 20 MiB cuMem allocations, 1 MiB into\n"
      "                               the first (as PyTorch's expandable segments hold tensors)\n"
      "      --exact                  cudaMalloc allocations of exactly the buffer and its guard bytes (by default\n"
      "                               each is rounded up to whole 2 MiB pages, as PyTorch's caching allocator makes\n"
      "                               them: peers' legacy IPC mappings of other sizes are slower, docs/gpu.md)\n"
      "  -h, --help\n",
      prog);
}

/* "64M" -> 64 << 20; an optional trailing B is accepted ("64MB"). */
static int parse_size(const char *text, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno != 0 || text[0] == '-') return -1;
  unsigned shift = 0;
  switch (*end) {
    case 'k':
    case 'K':
      shift = 10;
      end++;
      break;
    case 'm':
    case 'M':
      shift = 20;
      end++;
      break;
    case 'g':
    case 'G':
      shift = 30;
      end++;
      break;
    default:
      break;
  }
  if (*end == 'b' || *end == 'B') end++;
  if (*end != '\0' || (shift && v > (~0ull >> shift))) return -1;
  *out = (size_t)(v << shift);
  return 0;
}

static int parse_int(const char *text, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

int perf_parse_args(int argc, char **argv, struct perf_options *o, int rank) {
  static const struct option longopts[] = {{"minbytes", required_argument, 0, 'b'},
                                           {"maxbytes", required_argument, 0, 'e'},
                                           {"stepbytes", required_argument, 0, 'i'},
                                           {"stepfactor", required_argument, 0, 'f'},
                                           {"iters", required_argument, 0, 'n'},
                                           {"warmup_iters", required_argument, 0, 'w'},
                                           {"check", required_argument, 0, 'c'},
                                           {"op", required_argument, 0, 'o'},
                                           {"datatype", required_argument, 0, 'd'},
                                           {"root", required_argument, 0, 'r'},
                                           {"average", required_argument, 0, 'a'},
                                           {"nthreads", required_argument, 0, 't'},
                                           {"ngpus", required_argument, 0, 'g'},
                                           {"blocking", required_argument, 0, 'z'},
                                           {"json", required_argument, 0, 'J'},
                                           {"mpi_baseline", required_argument, 0, 'M'},
                                           {"timeout", required_argument, 0, 'T'},
                                           {"bootstrap", required_argument, 0, 'B'},
                                           {"local_register", required_argument, 0, 'R'},
                                           {"host", no_argument, 0, 'H'},
                                           {"memalloc", no_argument, 0, 'A'},
                                           {"segments", no_argument, 0, 'S'},
                                           {"exact", no_argument, 0, 'P'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->min_bytes = o->max_bytes = 32u << 20;
  o->step_bytes = 1u << 20;
  o->step_factor = 1.0;
  o->iters = 20;
  o->warmup_iters = 1;
  o->check = 1;
  o->op = PERF_OP_SUM;
  o->type = perf_type_by_name("float");
  o->average = 1;

  opterr = 0;
  int c, one;
  while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:o:d:r:a:t:g:z:J:M:T:B:R:h", longopts, NULL)) != -1) {
    const char *bad = NULL;
    switch (c) {
      case 'b':
        if (parse_size(optarg, &o->min_bytes)) bad = "-b wants a size such as 8, 1K, 64M";
        break;
      case 'e':
        if (parse_size(optarg, &o->max_bytes)) bad = "-e wants a size such as 8, 1K, 64M";
        break;
      case 'i':
        if (parse_size(optarg, &o->step_bytes)) bad = "-i wants a size";
        break;
      case 'f': {
        char *end;
        o->step_factor = strtod(optarg, &end);
        if (end == optarg || *end != '\0' || !(o->step_factor >= 1.0)) bad = "-f wants a factor >= 1";
        break;
      }
      case 'n':
        if (parse_int(optarg, 1, 1 << 30, &o->iters)) bad = "-n wants a positive count";
        break;
      case 'w':
        if (parse_int(optarg, 0, 1 << 30, &o->warmup_iters)) bad = "-w wants a count >= 0";
        break;
      case 'c':
        if (parse_int(optarg, 0, 1 << 20, &o->check)) bad = "-c wants 0 or a count of checked iterations";
        break;
      case 'o':
        if (strcmp(optarg, "all") == 0)
          o->op_all = 1;
        else if (perf_op_by_name(optarg, &o->op))
          bad = "-o wants sum, prod, min, max, avg, mulsum or all";
        break;
      case 'd':
        if (strcmp(optarg, "all") == 0)
          o->type_all = 1;
        else if (!(o->type = perf_type_by_name(optarg)))
          bad = "-d wants a type name (see -h) or all";
        break;
      case 'r':
        if (strcmp(optarg, "all") == 0)
          o->root_all = 1;
        else if (parse_int(optarg, 0, 1 << 30, &o->root))
          bad = "-r wants a rank or all";
        break;
      case 'a':
        if (parse_int(optarg, 0, 3, &o->average)) bad = "-a wants 0, 1, 2 or 3";
        break;
      case 't':
      case 'g':
        if (parse_int(optarg, 1, 1, &one)) bad = "-t and -g accept only 1 (one rank per process)";
        break;
      case 'z':
        if (parse_int(optarg, 0, 0, &one)) bad = "-z accepts only 0";
        break;
      case 'J':
        o->json_path = optarg;
        break;
      case 'M':
        if (parse_int(optarg, 0, 1, &o->mpi_baseline)) bad = "-M wants 0 or 1";
        break;
      case 'T':
        if (parse_int(optarg, 0, 1 << 30, &o->timeout_s)) bad = "-T wants seconds >= 0";
        break;
      case 'B':
        if (strcmp(optarg, "uid") == 0)
          o->use_unique_id = 1;
        else if (strcmp(optarg, "mpi") == 0)
          o->use_unique_id = 0;
        else
          bad = "-B wants mpi or uid";
        break;
      case 'R':
        if (parse_int(optarg, 0, 2, &o->register_mode)) bad = "-R wants 0, 1 or 2";
        break;
      case 'H':
        o->host_buffers = 1;
        break;
      case 'A':
        o->memalloc = PERF_ALLOC_MEMALLOC;
        break;
      case 'S':
        o->memalloc = PERF_ALLOC_SEGMENTS;
        break;
      case 'P':
        o->memalloc = PERF_ALLOC_EXACT;
        break;
      case 'h':
        if (rank == 0) usage(argv[0]);
        return 1;
      default:
        if (rank == 0) fprintf(stderr, "%s: unknown option or missing value: %s\n", argv[0], argv[optind - 1]);
        return -1;
    }
    if (bad) {
      if (rank == 0) fprintf(stderr, "%s: %s (got '%s')\n", argv[0], bad, optarg);
      return -1;
    }
  }
  if (optind < argc) {
    if (rank == 0) fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
    return -1;
  }
  if (o->min_bytes > o->max_bytes) {
    if (rank == 0) fprintf(stderr, "%s: -b %zu is larger than -e %zu\n", argv[0], o->min_bytes, o->max_bytes);
    return -1;
  }
  return 0;
}
