// sync_file_range(2), which Swift's Glibc module does not expose (glibc
// declares it only under _GNU_SOURCE).
#define _GNU_SOURCE
#include "strata_system.h"

#include <errno.h>

#if defined(__linux__)
#include <fcntl.h>
#include <malloc.h>

int64_t strata_heap_bytes_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return (int64_t)(info.uordblks + info.hblkhd);
#else
    return -1;
#endif
}

int strata_start_writeback(int fd, int64_t offset, int64_t length) {
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
}

int strata_release_free_heap(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}
#else
int strata_release_free_heap(void) { return 0; }

int64_t strata_heap_bytes_in_use(void) { return -1; }

int strata_start_writeback(int fd, int64_t offset, int64_t length) {
    (void)fd; (void)offset; (void)length;
    errno = ENOSYS;
    return -1;
}
#endif
