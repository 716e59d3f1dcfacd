/* What the FIFO tests between kernels and host threads send: a payload word every end can compute, so each byte
 * is checked where it arrives, and the geometry the GPU engine will use (docs/design.md, "Connections"). Compiles
 * as C11 (the host side, which uses the library's own dccl_conn functions) and as CUDA. */
#ifndef DCCL_CONN_PATTERN_H_
#define DCCL_CONN_PATTERN_H_

#include <stdint.h>

#include "pure/conn_desc.h"

#define CONN_NSLOTS 8                /* slots per FIFO */
#define CONN_BULK_BYTES (64u << 10)  /* a bulk slot: about one hand-off's worth of a PCIe link (1.2 us at 55 GB/s) */
#define CONN_LL_BYTES DCCL_LL_MAX_BYTES /* an LL slot: one 16-byte line (8 data bytes) per thread of a 512-thread CTA */
#define CONN_THREADS 512             /* threads per CTA; one CTA serves one FIFO (a channel) */
#define CONN_KIND 7                  /* the header's kind in every test slot */

/* Word w of the slot at FIFO position pos of FIFO `fifo`: differs from the same slot's previous lap. */
DCCL_CONN_FN uint32_t conn_pattern(uint32_t fifo, uint64_t pos, uint32_t w) {
  return ((uint32_t)pos * 0x9e3779b1u ^ fifo * 0x85ebca6bu) + w * 0x27d4eb2fu;
}

#endif
