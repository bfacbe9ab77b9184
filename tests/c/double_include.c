/* The header can be included twice and compiles as C and as C++. */
#include "cairn.h"
#include "cairn.h"

#ifdef __cplusplus
extern "C" int cairn_double_include_probe(void);
#endif
int cairn_double_include_probe(void) {
    cairn_status s = CAIRN_OK;
    return (int)s + (int)CAIRN_ABI_VERSION - (int)CAIRN_ABI_VERSION;
}
