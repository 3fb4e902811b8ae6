#ifndef STRATA_CRC32C_H
#define STRATA_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Extends `crc` (0 to start) with `length` bytes using the CPU's CRC32C
/// instruction (SSE4.2 on x86_64, the CRC extension on ARMv8).
/// Call only when `strata_crc32c_hardware_available()` returns 1.
uint32_t strata_crc32c_hardware(uint32_t crc, const void *data, size_t length);

/// Extends `crc` (0 to start) with `length` bytes, table-driven (slicing-by-8),
/// on any CPU.
uint32_t strata_crc32c_portable(uint32_t crc, const void *data, size_t length);

/// 1 when this CPU has a CRC32C instruction that `strata_crc32c_hardware` uses.
int strata_crc32c_hardware_available(void);

#ifdef __cplusplus
}
#endif

#endif
