// sync_file_range(2), which Swift's Glibc module does not expose (glibc
// declares it only under _GNU_SOURCE).
#define _GNU_SOURCE
#include "strata_system.h"

#include <errno.h>

#if defined(__linux__)
#include <fcntl.h>

int strata_start_writeback(int fd, int64_t offset, int64_t length) {
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
}
#else
int strata_start_writeback(int fd, int64_t offset, int64_t length) {
    (void)fd; (void)offset; (void)length;
    errno = ENOSYS;
    return -1;
}
#endif
