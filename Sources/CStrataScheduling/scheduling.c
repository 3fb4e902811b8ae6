// Thin wrappers over sched_getattr(2) and sched_setattr(2), which glibc
// before 2.41 does not wrap and Swift cannot reach through the variadic
// syscall(2).
#include "strata_scheduling.h"

#include <errno.h>

#if defined(__linux__)
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SCHED_BATCH
#define SCHED_BATCH 3
#endif

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), size
// SCHED_ATTR_SIZE_VER1; declared here because older libc headers lack it.
struct strata_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};

// SCHED_FLAG_RESET_ON_FORK. The utilization-clamp flags are never written,
// so clamps stay as they are.
#define STRATA_SCHED_FLAG_RESET_ON_FORK 0x01

static int strata_read_attr(struct strata_sched_attr *attr) {
    memset(attr, 0, sizeof *attr);
    if (syscall(SYS_sched_getattr, 0, attr, (unsigned int)sizeof *attr, 0u) != 0) return -1;
    if (attr->sched_policy != SCHED_OTHER && attr->sched_policy != SCHED_BATCH) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return 0;
}

int strata_thread_slice(uint64_t *nanoseconds, int *reset_on_fork) {
    struct strata_sched_attr attr;
    if (strata_read_attr(&attr) != 0) return -1;
    *nanoseconds = attr.sched_runtime;
    *reset_on_fork = (attr.sched_flags & STRATA_SCHED_FLAG_RESET_ON_FORK) != 0;
    return 0;
}

int strata_set_thread_slice(uint64_t nanoseconds, int reset_on_fork) {
    struct strata_sched_attr attr;
    if (strata_read_attr(&attr) != 0) return -1;
    attr.size = sizeof attr;
    attr.sched_flags = reset_on_fork ? STRATA_SCHED_FLAG_RESET_ON_FORK : 0;
    attr.sched_runtime = nanoseconds;
    return (int)syscall(SYS_sched_setattr, 0, &attr, 0u);
}

#else

int strata_thread_slice(uint64_t *nanoseconds, int *reset_on_fork) {
    (void)nanoseconds;
    (void)reset_on_fork;
    errno = ENOSYS;
    return -1;
}

int strata_set_thread_slice(uint64_t nanoseconds, int reset_on_fork) {
    (void)nanoseconds;
    (void)reset_on_fork;
    errno = ENOSYS;
    return -1;
}

#endif
