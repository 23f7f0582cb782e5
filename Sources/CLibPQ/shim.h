#ifndef SMART_BFF_CLIBPQ_SHIM_H
#define SMART_BFF_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
