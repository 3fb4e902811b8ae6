#ifndef STRATA_FUZZ_H
#define STRATA_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt, LLVM 11 and later): parses libFuzzer's
/// flags from argv and runs `callback` on every input. Declared here because
/// Swift cannot declare a C function itself; it exists only in a binary
/// linked with `-sanitize=fuzzer`, and strata-fuzz calls it only then.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
