/* layerdiff — which CPU kernel the BLAS runs (see blas.h, "Kernel policy").
 *
 * Why layerdiff decides and not the environment: OpenBLAS picks its kernel
 * once, in its library constructor, from OPENBLAS_CORETYPE or its own CPU
 * table. The table of Debian's 0.3.21 misses newer CPUs (Emerald Rapids
 * Xeons get SSE3 "Prescott": 34 GFLOP/s instead of ~200), and environments
 * preset OPENBLAS_CORETYPE for other programs (this workplace and its CI set
 * Haswell for numpy, which halves SGEMM on AVX-512 machines: 113 against 215
 * GFLOP/s). The issue wants the right kernel without the user setting
 * anything, so a preset OPENBLAS_CORETYPE is ignored (and named in the
 * description) and the kernel comes from the CPU's features; a user who
 * wants another one says so to layerdiff itself with LAYERDIFF_BLAS_CORETYPE.
 *
 * Every name is checked before the library sees it: OpenBLAS silently falls
 * back to its own detection on an unknown name, and a core whose
 * instructions the CPU lacks dies with SIGILL on the first product (tried on
 * Zen 5: Opteron, Bulldozer, Piledriver, Steamroller, Excavator). */
#include "backends/blas.h"

#include <cpuid.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The x86-64 OPENBLAS_CORETYPE names of OpenBLAS 0.3.21 (driver/others/
 * dynamic.c; compared case-insensitively, as OpenBLAS does) plus
 * SapphireRapids (0.3.22 and later; 0.3.21 runs Cooperlake for it), with the
 * instructions their kernels need. */
typedef struct openblas_core {
    const char *name;
    unsigned needs; /* LD_CPU_* */
} openblas_core;

static const openblas_core openblas_cores[] = {
    {"Katmai", LD_CPU_SSE3},        {"Coppermine", LD_CPU_SSE3},
    {"Northwood", LD_CPU_SSE3},     {"Prescott", LD_CPU_SSE3},
    {"Banias", LD_CPU_SSE3},        {"Atom", LD_CPU_SSSE3},
    {"Core2", LD_CPU_SSSE3},        {"Penryn", LD_CPU_SSE41},
    {"Dunnington", LD_CPU_SSE41},   {"Nehalem", LD_CPU_SSE42},
    {"Athlon", LD_CPU_SSE3},        {"Opteron", LD_CPU_3DNOW},
    {"Opteron_SSE3", LD_CPU_3DNOW | LD_CPU_SSE3},
    {"Barcelona", LD_CPU_SSE3},     {"Nano", LD_CPU_SSSE3},
    {"Sandybridge", LD_CPU_AVX},    {"Bulldozer", LD_CPU_AVX | LD_CPU_FMA4},
    {"Piledriver", LD_CPU_AVX | LD_CPU_FMA4}, {"Haswell", LD_CPU_AVX2_FMA},
    {"Steamroller", LD_CPU_AVX | LD_CPU_FMA4}, {"Excavator", LD_CPU_AVX2_FMA | LD_CPU_FMA4},
    {"Zen", LD_CPU_AVX2_FMA},       {"SkylakeX", LD_CPU_AVX512},
    {"Cooperlake", LD_CPU_AVX512},  {"SapphireRapids", LD_CPU_AVX512},
};

#define N_OPENBLAS_CORES ((int)(sizeof openblas_cores / sizeof openblas_cores[0]))

static const struct {
    unsigned bit;
    const char *name;
} feature_names[] = {
    {LD_CPU_SSE3, "SSE3"},     {LD_CPU_SSSE3, "SSSE3"}, {LD_CPU_SSE41, "SSE4.1"},
    {LD_CPU_SSE42, "SSE4.2"},  {LD_CPU_AVX, "AVX"},     {LD_CPU_AVX2_FMA, "AVX2+FMA"},
    {LD_CPU_AVX512, "AVX-512 (F, CD, BW, DQ, VL)"},     {LD_CPU_FMA4, "FMA4"},
    {LD_CPU_3DNOW, "3DNow!"},
};

unsigned ld_blas_cpu_features(void)
{
    /* GCC's __builtin_cpu_supports also checks that the OS saves the vector
     * state (XGETBV), so an AVX-512 answer means the kernel can run. */
    __builtin_cpu_init();
    unsigned f = 0;
    f |= __builtin_cpu_supports("sse3") ? LD_CPU_SSE3 : 0;
    f |= __builtin_cpu_supports("ssse3") ? LD_CPU_SSSE3 : 0;
    f |= __builtin_cpu_supports("sse4.1") ? LD_CPU_SSE41 : 0;
    f |= __builtin_cpu_supports("sse4.2") ? LD_CPU_SSE42 : 0;
    f |= __builtin_cpu_supports("avx") ? LD_CPU_AVX : 0;
    f |= __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? LD_CPU_AVX2_FMA : 0;
    f |= __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl")
             ? LD_CPU_AVX512 : 0;
    f |= __builtin_cpu_supports("fma4") ? LD_CPU_FMA4 : 0;
    unsigned a, b, c, d; /* 3DNow!: CPUID 0x80000001, EDX bit 31 (not in GCC's list) */
    if (__get_cpuid(0x80000001u, &a, &b, &c, &d) && (d & (1u << 31)))
        f |= LD_CPU_3DNOW;
    return f;
}

/* "AVX-512 (F, CD, BW, DQ, VL) and FMA4" for the bits in `missing`. */
static void name_features(unsigned missing, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof feature_names / sizeof feature_names[0]; i++)
        if (missing & feature_names[i].bit) {
            int n = snprintf(buf + used, size - used, "%s%s", used ? " and " : "",
                             feature_names[i].name);
            if (n < 0 || (size_t)n >= size - used)
                return;
            used += (size_t)n;
        }
}

static const openblas_core *find_core(const char *name)
{
    for (int i = 0; i < N_OPENBLAS_CORES; i++)
        if (strcasecmp(name, openblas_cores[i].name) == 0)
            return &openblas_cores[i];
    return NULL;
}

static ld_status requested_core(const char *requested, unsigned cpu, ld_blas_core_choice *out,
                                ld_error *err)
{
    const openblas_core *core = find_core(requested);
    if (!core) {
        char names[400];
        size_t used = 0;
        for (int i = 0; i < N_OPENBLAS_CORES && used < sizeof names; i++) {
            int n = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                             openblas_cores[i].name);
            if (n < 0)
                break;
            used += (size_t)n;
        }
        return ld_error_set(err, LD_ERR_USAGE, "LAYERDIFF_BLAS_CORETYPE=%s is not an OpenBLAS "
                            "core type (one of %s)", requested, names);
    }
    unsigned missing = core->needs & ~cpu;
    if (missing) {
        char what[160];
        name_features(missing, what, sizeof what);
        return ld_error_set(err, LD_ERR_USAGE, "LAYERDIFF_BLAS_CORETYPE=%s: OpenBLAS's %s kernel "
                            "needs %s, which this CPU lacks", requested, core->name, what);
    }
    snprintf(out->core, sizeof out->core, "%s", core->name);
    out->needs = core->needs;
    snprintf(out->why, sizeof out->why, "LAYERDIFF_BLAS_CORETYPE=%s set by the user", requested);
    return LD_OK;
}

ld_status ld_blas_choose_core(const char *requested, const char *preset, unsigned cpu,
                              ld_blas_core_choice *out, ld_error *err)
{
    memset(out, 0, sizeof *out);
    if (requested && *requested)
        return requested_core(requested, cpu, out, err);
    const char *core = cpu & LD_CPU_AVX512 ? "SkylakeX" : cpu & LD_CPU_AVX2_FMA ? "Haswell" : "";
    snprintf(out->core, sizeof out->core, "%s", core);
    out->needs = cpu & LD_CPU_AVX512 ? LD_CPU_AVX512 : cpu & LD_CPU_AVX2_FMA ? LD_CPU_AVX2_FMA : 0;
    int n = *core ? snprintf(out->why, sizeof out->why, "chosen by layerdiff for this %s CPU",
                             cpu & LD_CPU_AVX512 ? "AVX-512" : "AVX2+FMA")
                  : snprintf(out->why, sizeof out->why, "the library's own CPU detection");
    if (preset && *preset && n > 0 && (size_t)n < sizeof out->why)
        snprintf(out->why + n, sizeof out->why - (size_t)n,
                 "; OPENBLAS_CORETYPE=%s in the environment ignored, "
                 "LAYERDIFF_BLAS_CORETYPE chooses", preset);
    return LD_OK;
}
