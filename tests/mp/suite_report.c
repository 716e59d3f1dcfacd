/* Judging the records of all ranks: a case passes when every rank ran it and found its output right, and, for
 * collectives whose outputs must agree, every rank's output hash equals rank 0's. */
#include <stdio.h>
#include <stdlib.h>

#include "suite.h"

#define REPORT_MAX_LINES 40

/* NULL if case i passed, else why not; *rank_out names the rank concerned. */
static const char *judge(const struct suite_case *cases, size_t ncases, const struct suite_record *records, int nranks,
                         size_t i, uint64_t *hashes, int *rank_out) {
  for (int r = 0; r < nranks; r++) {
    const struct suite_record *rec = &records[(size_t)r * ncases + i];
    *rank_out = r;
    if (rec->status == SUITE_NOT_RUN) return "not run (an earlier error, crash or hang stopped the rank)";
    if (rec->status != SUITE_OK) return "wrong output (see that rank's FAIL lines)";
    hashes[r] = rec->output_hash;
  }
  if (suite_coll_outputs_agree(cases[i].coll)) {
    int r = tc_first_disagreeing_rank(hashes, nranks, 1);
    if (r >= 0) {
      *rank_out = r;
      return "output differs bitwise from rank 0's";
    }
  }
  *rank_out = -1;
  return NULL;
}

size_t suite_report(const struct suite_case *cases, size_t ncases, const struct suite_record *records, int nranks) {
  uint64_t *hashes = calloc((size_t)nranks, sizeof(*hashes));
  size_t passed = 0, failed = 0, lines = 0;
  size_t per_coll_pass[SUITE_NUM_COLLS] = {0}, per_coll_fail[SUITE_NUM_COLLS] = {0};
  for (size_t i = 0; i < ncases; i++) {
    int rank = -1;
    const char *why = hashes ? judge(cases, ncases, records, nranks, i, hashes, &rank) : "out of memory";
    if (!why) {
      passed++;
      per_coll_pass[cases[i].coll]++;
      continue;
    }
    failed++;
    per_coll_fail[cases[i].coll]++;
    if (lines++ < REPORT_MAX_LINES) {
      char name[192];
      suite_case_name(&cases[i], name, sizeof(name));
      printf("FAILED case #%zu (%s): rank %d: %s\n", i, name, rank, why);
    }
  }
  if (lines > REPORT_MAX_LINES) printf("... and %zu more failed cases\n", lines - REPORT_MAX_LINES);
  free(hashes);
  for (int c = 0; c < SUITE_NUM_COLLS; c++) {
    if (per_coll_pass[c] + per_coll_fail[c])
      printf("  %-15s %6zu passed, %zu failed\n", suite_coll_name((enum suite_coll)c), per_coll_pass[c],
             per_coll_fail[c]);
  }
  printf("checked %zu cases on %d ranks\n", ncases, nranks);
  printf("%zu passed, %zu failed\n", passed, failed);
  fflush(stdout);
  return failed;
}

/* Each planted corruption must be caught: gross ones by the value check on the last rank (and, with two or
 * more ranks, by the bitwise comparison); a last-bit flip by the bitwise comparison. The clean control must
 * pass. Each expectation counts as one case. */
size_t suite_report_selftest(const struct suite_case *cases, size_t ncases, const struct suite_record *records,
                             int nranks) {
  uint64_t *hashes = calloc((size_t)nranks, sizeof(*hashes));
  size_t passed = 0, failed = 0;
  const int last = nranks - 1;
  if (!hashes) return 1;
#define EXPECTATION(ok, ...)                          \
  do {                                                \
    printf("selftest: %s: ", (ok) ? "ok" : "FAILED"); \
    printf(__VA_ARGS__);                              \
    printf("\n");                                     \
    if (ok)                                           \
      passed++;                                       \
    else                                              \
      failed++;                                       \
  } while (0)
  for (size_t i = 0; i < ncases; i++) {
    const struct suite_case *c = &cases[i];
    char name[192];
    suite_case_name(c, name, sizeof(name));
    int others_ok = 1, ran = 1;
    for (int r = 0; r < nranks; r++) {
      const struct suite_record *rec = &records[(size_t)r * ncases + i];
      ran &= rec->status != SUITE_NOT_RUN;
      if (r != last) others_ok &= rec->status == SUITE_OK;
      hashes[r] = rec->output_hash;
    }
    const int last_status = records[(size_t)last * ncases + i].status;
    const int disagreeing = tc_first_disagreeing_rank(hashes, nranks, 1);
    if (!ran) {
      EXPECTATION(0, "%s: not run on every rank", name);
      continue;
    }
    if (c->corrupt == SUITE_CORRUPT_NONE) {
      EXPECTATION(others_ok && last_status == SUITE_OK && disagreeing < 0, "%s: clean control passes", name);
      continue;
    }
    EXPECTATION(others_ok, "%s: ranks without the corruption pass", name);
    if (c->corrupt == SUITE_CORRUPT_GROSS)
      EXPECTATION(last_status == SUITE_BAD, "%s: the value check caught the corrupted element on rank %d", name, last);
    if (nranks > 1)
      EXPECTATION(disagreeing == last, "%s: the bitwise comparison named rank %d (it named %d)", name, last,
                  disagreeing);
    else
      printf("selftest: note: %s: one rank, no bitwise comparison to make (not counted)\n", name);
  }
#undef EXPECTATION
  free(hashes);
  printf("checked %zu selftest expectations on %d ranks\n", passed + failed, nranks);
  printf("%zu passed, %zu failed\n", passed, failed);
  fflush(stdout);
  return failed;
}
