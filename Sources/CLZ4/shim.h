#ifndef STRATA_CLZ4_SHIM_H
#define STRATA_CLZ4_SHIM_H
#include <lz4.h>
#endif
