/* Makes OpenBLAS start on its Prescott (SSE3) kernels with OPENBLAS_CORETYPE unset by
 * main: what OpenBLAS 0.3.21 does by itself on a CPU model it does not know (Emerald
 * Rapids, Raptor Lake, ...). Lets the meshc runtime's choice of kernels
 * (runtime/src/blas_kernels.cpp) be seen and measured on any x86 machine
 * (docs/benchmarks.md, "BLAS kernels"):
 *
 *   cc -O2 -shared -fPIC tests/bench/blas/fallback_preload.c -o /tmp/fallback_preload.so \
 *      -lopenblas
 *   LD_PRELOAD=/tmp/fallback_preload.so ./prog --help | grep contractions
 *
 * Whichever constructor runs first, OpenBLAS's (gotoblas_init) or this one, OpenBLAS
 * ends on Prescott: gotoblas_dynamic_init keeps a table already chosen. A test and
 * benchmark aid only; nothing links it. */
#include <stdlib.h>

void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);

__attribute__((constructor)) static void fallback_to_prescott(void) {
    const char* user = getenv("OPENBLAS_CORETYPE");
    if (user)
        return; /* the user's choice stands */
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}
