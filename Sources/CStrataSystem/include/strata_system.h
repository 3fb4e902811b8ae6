#ifndef STRATA_SYSTEM_H
#define STRATA_SYSTEM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Starts writeback of the file's dirty pages in [offset, offset + length)
/// without waiting for it: Linux's `sync_file_range(2)` with
/// `SYNC_FILE_RANGE_WRITE`, which glibc declares only under _GNU_SOURCE.
/// It makes nothing durable (no metadata, no device cache flush); a later
/// `fdatasync(2)` still does that, with less left to write. Returns 0, or -1
/// with `errno` set (ENOSYS where the call does not exist, as on Darwin).
int strata_start_writeback(int fd, int64_t offset, int64_t length);

/// The bytes the C heap has handed out and not taken back (glibc's
/// `mallinfo2`: `uordblks + hblkhd`), for measuring what a structure really
/// holds; -1 where it cannot be known.
int64_t strata_heap_bytes_in_use(void);

/// Hands the C heap's free pages back to the system (glibc's
/// `malloc_trim(0)`, every arena): memory freed on worker threads stays in
/// their arenas otherwise, resident, until those threads allocate it again.
/// Returns 1 when it released memory, 0 when it did not or cannot (other
/// C libraries).
int strata_release_free_heap(void);

/// Asks the CPU to start loading the cache line holding `p` for reading,
/// without waiting for it. Never faults, whatever `p` is: a hint, so that
/// a memory round trip overlaps the work before the load that needs it.
static inline void strata_prefetch(const void *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

#ifdef __cplusplus
}
#endif

#endif
