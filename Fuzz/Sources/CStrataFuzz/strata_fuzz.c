// Nothing to define: the target exists for its header (a C target needs a
// source file). See include/strata_fuzz.h.
#include "strata_fuzz.h"
