/* Command line of coll_suite. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suite.h"

static void usage(const char *prog) {
  fprintf(stderr,
          "usage: %s [options]\n"
          "  launch: under mpirun (default), or --fork N (no MPI: N forked ranks, TCP bootstrap)\n"
          "  --algo ring|tree|oneshot  sets DCCL_ALGO before any DCCL call (default: the cost model chooses)\n"
          "  --alltoall-64m        only: every rank sends 64 MiB to every rank in one group (sends first)\n"
          "  --selftest            only: plant corruptions and show the checks catch them\n"
          "  --quick               fewer types (uint8,int32,half,float,bfloat16,f8e5m2), sizes 0,1,7,1000,65543,\n"
          "                        no 64 MiB cases\n"
          "  --colls LIST          allreduce,broadcast,reduce,allgather,reducescatter,sendrecv (both patterns),\n"
          "                        sendrecv_ring,sendrecv_pairs\n"
          "  --types LIST          int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16,f8e4m3,f8e5m2\n"
          "  --ops LIST            sum,prod,max,min,avg,premulsum\n"
          "  --sizes LIST          element counts per rank (default 0,1,7,1000,1048579)\n"
          "  --placement in|out|both\n"
          "  --no-big              leave out the 64 MiB cases\n"
          "  --seed S              input seed (default 1)\n"
          "  --case-timeout S      a case taking longer is reported as a hang (default 120)\n"
          "  --timeout S           fork mode: the parent kills its children after S seconds (default 1800)\n"
          "  --full-check          every rank checks its whole output by value (default: where all ranks hold\n"
          "                        the same output, each checks a 1/N share and the bitwise comparison covers\n"
          "                        the rest)\n"
          "  --all-roots           every root at every size (default: above 65536 elements one root per case,\n"
          "                        rotating through 0, the middle rank and the last rank)\n"
          "  --device              buffers in GPU memory (each rank on GPU rank %% GPUs): inputs copied in, outputs\n"
          "                        copied out and checked as on the host\n"
          "  --list                print the cases and exit\n"
          "  --verbose\n",
          prog);
}

/* Calls parse_one on each comma-separated word; -1 if any is rejected. */
static int for_each_word(const char *list, int (*parse_one)(const char *word, void *ctx), void *ctx) {
  char *copy = strdup(list);
  if (!copy) return -1;
  int rc = 0;
  char *save = NULL;
  for (char *w = strtok_r(copy, ",", &save); w && rc == 0; w = strtok_r(NULL, ",", &save)) rc = parse_one(w, ctx);
  free(copy);
  return rc;
}

static int parse_coll(const char *w, void *ctx) {
  unsigned *mask = ctx;
  if (strcmp(w, "sendrecv") == 0) {
    *mask |= 1u << SUITE_SENDRECV_RING | 1u << SUITE_SENDRECV_PAIRS;
    return 0;
  }
  for (int c = 0; c < SUITE_ALLTOALL; c++) {
    if (strcmp(w, suite_coll_name((enum suite_coll)c)) == 0) {
      *mask |= 1u << c;
      return 0;
    }
  }
  fprintf(stderr, "unknown collective '%s'\n", w);
  return -1;
}

static int parse_type(const char *w, void *ctx) {
  ncclDataType_t t;
  if (tc_type_from_name(w, &t)) {
    fprintf(stderr, "unknown type '%s'\n", w);
    return -1;
  }
  *(unsigned *)ctx |= 1u << t;
  return 0;
}

static int parse_op(const char *w, void *ctx) {
  enum tc_op op;
  if (tc_op_from_name(w, &op)) {
    fprintf(stderr, "unknown op '%s'\n", w);
    return -1;
  }
  *(unsigned *)ctx |= 1u << op;
  return 0;
}

static int parse_size(const char *w, void *ctx) {
  struct suite_options *opt = ctx;
  char *end;
  unsigned long long v = strtoull(w, &end, 0);
  if (*end || opt->nsizes == (int)(sizeof(opt->sizes) / sizeof(opt->sizes[0]))) {
    fprintf(stderr, "bad size '%s' (at most 16 sizes)\n", w);
    return -1;
  }
  opt->sizes[opt->nsizes++] = (size_t)v;
  return 0;
}

int suite_parse_options(int argc, char **argv, struct suite_options *opt) {
  enum {
    O_ALGO = 256,
    O_FORK,
    O_A2A,
    O_SELFTEST,
    O_QUICK,
    O_COLLS,
    O_TYPES,
    O_OPS,
    O_SIZES,
    O_PLACEMENT,
    O_NOBIG,
    O_SEED,
    O_CASE_TIMEOUT,
    O_TIMEOUT,
    O_LIST,
    O_VERBOSE,
    O_HELP,
    O_FULL,
    O_ALL_ROOTS, O_DEVICE
  };
  static const struct option longopts[] = {{"algo", required_argument, 0, O_ALGO},
                                           {"fork", required_argument, 0, O_FORK},
                                           {"alltoall-64m", no_argument, 0, O_A2A},
                                           {"selftest", no_argument, 0, O_SELFTEST},
                                           {"quick", no_argument, 0, O_QUICK},
                                           {"colls", required_argument, 0, O_COLLS},
                                           {"types", required_argument, 0, O_TYPES},
                                           {"ops", required_argument, 0, O_OPS},
                                           {"sizes", required_argument, 0, O_SIZES},
                                           {"placement", required_argument, 0, O_PLACEMENT},
                                           {"no-big", no_argument, 0, O_NOBIG},
                                           {"seed", required_argument, 0, O_SEED},
                                           {"case-timeout", required_argument, 0, O_CASE_TIMEOUT},
                                           {"timeout", required_argument, 0, O_TIMEOUT},
                                           {"list", no_argument, 0, O_LIST},
                                           {"verbose", no_argument, 0, O_VERBOSE},
                                           {"help", no_argument, 0, O_HELP},
                                           {"full-check", no_argument, 0, O_FULL},
                                           {"all-roots", no_argument, 0, O_ALL_ROOTS},
                                           {"device", no_argument, 0, O_DEVICE},
                                           {0, 0, 0, 0}};
  memset(opt, 0, sizeof(*opt));
  opt->big = 1;
  opt->placements = 3;
  opt->seed = 1;
  opt->case_timeout_s = 120;
  opt->total_timeout_s = 1800;
  unsigned colls = 0, types = 0, ops = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
      case O_ALGO:
        if (strcmp(optarg, "ring") && strcmp(optarg, "tree") && strcmp(optarg, "oneshot")) {
          fprintf(stderr, "--algo must be ring, tree or oneshot\n");
          return -1;
        }
        opt->algo = optarg;
        break;
      case O_FORK:
        opt->fork_ranks = atoi(optarg);
        if (opt->fork_ranks < 1 || opt->fork_ranks > 64) {
          fprintf(stderr, "--fork takes 1..64 ranks\n");
          return -1;
        }
        break;
      case O_A2A:
        opt->alltoall_64m = 1;
        break;
      case O_SELFTEST:
        opt->selftest = 1;
        break;
      case O_QUICK:
        opt->quick = 1;
        break;
      case O_COLLS:
        if (for_each_word(optarg, parse_coll, &colls)) return -1;
        break;
      case O_TYPES:
        if (for_each_word(optarg, parse_type, &types)) return -1;
        break;
      case O_OPS:
        if (for_each_word(optarg, parse_op, &ops)) return -1;
        break;
      case O_SIZES:
        if (for_each_word(optarg, parse_size, opt)) return -1;
        break;
      case O_PLACEMENT:
        opt->placements = !strcmp(optarg, "out") ? 1 : !strcmp(optarg, "in") ? 2 : !strcmp(optarg, "both") ? 3 : 0;
        if (!opt->placements) {
          fprintf(stderr, "--placement must be in, out or both\n");
          return -1;
        }
        break;
      case O_NOBIG:
        opt->big = 0;
        break;
      case O_SEED:
        opt->seed = strtoull(optarg, NULL, 0);
        break;
      case O_CASE_TIMEOUT:
        opt->case_timeout_s = atoi(optarg);
        break;
      case O_TIMEOUT:
        opt->total_timeout_s = atoi(optarg);
        break;
      case O_LIST:
        opt->list_only = 1;
        break;
      case O_VERBOSE:
        opt->verbose = 1;
        break;
      case O_FULL:
        opt->full_check = 1;
        break;
      case O_ALL_ROOTS:
        opt->all_roots = 1;
        break;
      case O_DEVICE:
        opt->device = 1;
        break;
      default:
        usage(argv[0]);
        return -1;
    }
  }
  if (optind != argc) {
    usage(argv[0]);
    return -1;
  }
  static const size_t default_sizes[] = {0, 1, 7, 1000, 1048579};
  static const size_t quick_sizes[] = {0, 1, 7, 1000, 65543};
  if (opt->nsizes == 0) {
    const size_t *s = opt->quick ? quick_sizes : default_sizes;
    for (int i = 0; i < 5; i++) opt->sizes[opt->nsizes++] = s[i];
  }
  if (!types) {
    if (opt->quick)
      types = 1u << ncclUint8 | 1u << ncclInt32 | 1u << ncclFloat16 | 1u << ncclFloat32 | 1u << ncclBfloat16 |
              1u << ncclFloat8e5m2;
    else
      types = (1u << ncclNumTypes) - 1;
  }
  if (opt->quick) opt->big = 0;
  opt->colls_mask = colls ? colls : (1u << SUITE_ALLTOALL) - 1;
  opt->types_mask = types;
  opt->ops_mask = ops ? ops : (1u << TC_NUM_OPS) - 1;
  return 0;
}
