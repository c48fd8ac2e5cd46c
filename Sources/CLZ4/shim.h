#ifndef SETTEE_CLZ4_SHIM_H
#define SETTEE_CLZ4_SHIM_H

// Debian's liblz4 (pkg-config liblz4), and nothing else.
#include <lz4.h>

#endif
