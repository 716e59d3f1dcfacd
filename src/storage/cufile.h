/* GPUDirect Storage through NVIDIA's cuFile library (libcufile.so.0), loaded at run time: no link-time dependency,
 * and the few types it needs declared here. The library is loaded and its driver opened once per process; a file
 * is registered for a load, read in chunks straight into GPU memory (cuFileRead: DMA from the disk where the
 * machine has nvidia-fs or P2PDMA, cuFile's own bounce in its compat mode), and deregistered at the load's end. */
#ifndef DCCL_STORAGE_CUFILE_H_
#define DCCL_STORAGE_CUFILE_H_

#include <stddef.h>
#include <sys/types.h>

/* Whether the nvidia-fs kernel module is loaded: cuFile then reads by DMA, not through its compat mode. */
int dccl_cufile_gpudirect_loaded(void);

/* cuFile's handle of `fd`'s file, or NULL with the reason in `why` (the library missing, its driver not opening,
 * or the registration refused, with cuFile's error code); with a handle, `why` says cuFile took the file. */
void *dccl_cufile_open(int fd, char *why, size_t len);

/* Up to `n` bytes from `file_offset` into the GPU memory at `base` + `base_offset`: the bytes read (0 at the file's
 * end), or -1 with the reason in `why`. Several threads may read one handle at once. */
ssize_t dccl_cufile_read(void *handle, void *base, size_t n, size_t file_offset, size_t base_offset, char *why,
                         size_t len);

void dccl_cufile_close(void *handle);

#endif
