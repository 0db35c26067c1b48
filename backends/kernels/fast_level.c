/* layerdiff — level of the memory-bound fast paths (see fast_level.h). */
#include "backends/kernels/fast_level.h"

#include <stdatomic.h>

static atomic_int forced_level = LD_FAST_AUTO;

bool ld_fast_level_supported(ld_fast_level level)
{
    switch (level) {
    case LD_FAST_PORTABLE:
        return true;
    case LD_FAST_AVX2: {
#if defined(__x86_64__)
        static atomic_int known; /* 0: not asked yet, 1: no, 2: yes (races write the same) */
        int v = atomic_load(&known);
        if (v == 0) {
            __builtin_cpu_init();
            v = __builtin_cpu_supports("avx2") ? 2 : 1;
            atomic_store(&known, v);
        }
        return v == 2;
#else
        return false;
#endif
    }
    default:
        return false;
    }
}

ld_fast_level ld_fast_level_active(void)
{
    int f = atomic_load_explicit(&forced_level, memory_order_relaxed);
    if (f != LD_FAST_AUTO)
        return (ld_fast_level)f;
    return ld_fast_level_supported(LD_FAST_AVX2) ? LD_FAST_AVX2 : LD_FAST_PORTABLE;
}

bool ld_fast_force_level(ld_fast_level level)
{
    if (level != LD_FAST_AUTO && !ld_fast_level_supported(level))
        return false;
    atomic_store_explicit(&forced_level, (int)level, memory_order_relaxed);
    return true;
}
