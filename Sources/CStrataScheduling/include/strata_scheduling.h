#ifndef STRATA_SCHEDULING_H
#define STRATA_SCHEDULING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The calling thread's scheduler time slice, in nanoseconds: Linux's
/// `sched_getattr(2)` `sched_runtime` for a SCHED_OTHER or SCHED_BATCH thread
/// (EEVDF, kernel 6.6 and later; 6.12 and later honour a custom value), and
/// whether it has SCHED_FLAG_RESET_ON_FORK. Returns 0 and stores both, or -1
/// with `errno` set: ENOSYS off Linux, EOPNOTSUPP when the thread runs under
/// another policy (real-time, deadline, idle), whose slice Strata leaves alone.
int strata_thread_slice(uint64_t *nanoseconds, int *reset_on_fork);

/// Sets the calling thread's slice (`sched_setattr(2)`, `sched_runtime`) and
/// its SCHED_FLAG_RESET_ON_FORK, keeping its policy and nice value. The kernel
/// clamps the slice to 0.1–100 ms; 0 means the default. Threads the thread
/// creates inherit its slice unless `reset_on_fork` is set, which gives them
/// the default. Needs no privilege: a longer or shorter slice changes when a
/// thread is preempted, not its share of the CPU. Returns 0, or -1 with
/// `errno` set as for `strata_thread_slice`.
int strata_set_thread_slice(uint64_t nanoseconds, int reset_on_fork);

#ifdef __cplusplus
}
#endif

#endif
