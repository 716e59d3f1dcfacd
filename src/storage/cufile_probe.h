/* GPUDirect Storage through NVIDIA's cuFile library (libcufile.so.0), loaded at run time: no link-time dependency,
 * and the few types it needs declared here. What is built: loading the library, opening its driver (once per
 * process) and asking it to register a file, which says whether cuFile would take the file; the load then logs
 * cuFile's answer and uses the bounce. Reading through cuFile is not built: no machine here gets past the
 * registration (the H200's ext4 on virtio answers 5027). */
#ifndef DCCL_STORAGE_CUFILE_PROBE_H_
#define DCCL_STORAGE_CUFILE_PROBE_H_

#include <stddef.h>

/* 1 when cuFile registers `fd`'s file (then deregistered), 0 with the reason in `why` (the library missing, its
 * driver not opening, or the registration refused, with cuFile's error code). */
int dccl_cufile_accepts(int fd, char *why, size_t len);

#endif
