// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI,
// ext4, LevelDB and RocksDB. Check value: crc32c("123456789") = 0xE3069283.
//
// Two paths: the CPU instruction where there is one, and slicing-by-8 tables
// everywhere else. Both are tested against each other and the check value.

#include "strata_crc32c.h"
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static int table_ready = 0;

static void build_tables(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int k = 1; k < 8; k++) {
            c = table[0][c & 0xff] ^ (c >> 8);
            table[k][n] = c;
        }
    }
    __atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t strata_crc32c_portable(uint32_t crc, const void *data, size_t length) {
    // Building the tables twice from two threads writes the same values; the
    // flag only saves the work.
    if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) build_tables();
    const uint8_t *p = (const uint8_t *)data;
    crc = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        uint32_t lo = (uint32_t)word ^ crc;
        uint32_t hi = (uint32_t)(word >> 32);
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
              table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
              table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
              table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        length -= 8;
    }
    while (length--) crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
uint32_t strata_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t c = ~crc;
    while (length && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); length--; }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        length -= 8;
    }
    while (length--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

int strata_crc32c_hardware_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>

uint32_t strata_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const uint8_t *p = (const uint8_t *)data;
    uint32_t c = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __crc32cd(c, word);
        p += 8;
        length -= 8;
    }
    while (length--) c = __crc32cb(c, *p++);
    return ~c;
}

int strata_crc32c_hardware_available(void) { return 1; }

#else

uint32_t strata_crc32c_hardware(uint32_t crc, const void *data, size_t length) {
    return strata_crc32c_portable(crc, data, length);
}

int strata_crc32c_hardware_available(void) { return 0; }

#endif
