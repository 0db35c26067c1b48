/* layerdiff — generated model inputs: the PRNG, value filling, parsing of
 * --input-shapes / --val-range, shape resolution (see inputs.h). Loading
 * from files is in inputs_load.c. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/inputs_internal.h"
#include "layerdiff/round.h"

/* --- PRNG ------------------------------------------------------------------------ */

uint64_t ld_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

void ld_rng_seed(ld_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = ld_splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t ld_rng_next(ld_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ld_rng_uniform(ld_rng *rng)
{
    return (double)(ld_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint64_t ld_rng_below(ld_rng *rng, uint64_t span)
{
    if (span == 0)
        return ld_rng_next(rng);
    /* Reject the lowest 2^64 mod span values so every residue is equally likely. */
    uint64_t threshold = (0 - span) % span;
    for (;;) {
        uint64_t r = ld_rng_next(rng);
        if (r >= threshold)
            return r % span;
    }
}

void ld_rng_for_input(ld_rng *rng, uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3u;
    }
    ld_rng_seed(rng, seed ^ h);
}

/* --- filling ----------------------------------------------------------------------- */

/* The dtype's representable range as doubles (integers: exact bounds). */
static void dtype_limits(ld_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case LD_DTYPE_FLOAT16: *lo = -65504.0; *hi = 65504.0; return;
    case LD_DTYPE_BFLOAT16: *lo = -0x1.fep127; *hi = 0x1.fep127; return;
    case LD_DTYPE_FLOAT32: *lo = -FLT_MAX; *hi = FLT_MAX; return;
    case LD_DTYPE_FLOAT64: *lo = -DBL_MAX; *hi = DBL_MAX; return;
    case LD_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return;
    case LD_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return;
    case LD_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return;
    case LD_DTYPE_INT64: *lo = -0x1p63; *hi = 0x1p63; return;   /* hi exclusive, below */
    case LD_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; return;
    case LD_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; return;
    case LD_DTYPE_UINT32: *lo = 0; *hi = UINT32_MAX; return;
    case LD_DTYPE_UINT64: *lo = 0; *hi = 0x1p64; return;       /* hi exclusive, below */
    default: *lo = 0; *hi = 1; return;
    }
}

static ld_status range_error(ld_error *err, const ld_tensor *t, ld_value_range r, const char *why)
{
    return ld_error_set(err, LD_ERR_USAGE, "input '%s' (%s): value range [%.17g, %.17g] %s",
                        t->name, ld_dtype_name(t->dtype), r.lo, r.hi, why);
}

static ld_status fill_float(ld_tensor *t, ld_rng *rng, ld_value_range r)
{
    double width = r.hi - r.lo;
    for (int64_t i = 0; i < t->count; i++) {
        double v = r.lo + width * ld_rng_uniform(rng);
        if (v > r.hi) /* rounding of lo + width * u can step past hi */
            v = r.hi;
        switch (t->dtype) {
        case LD_DTYPE_FLOAT64: ((double *)t->data)[i] = v; break;
        case LD_DTYPE_FLOAT32: ((float *)t->data)[i] = (float)v; break;
        case LD_DTYPE_FLOAT16: ((ld_fp16 *)t->data)[i] = ld_fp32_to_fp16((float)v); break;
        default: ((ld_bf16 *)t->data)[i] = ld_fp32_to_bf16((float)v); break;
        }
    }
    return LD_OK;
}

/* Integers in [ceil(lo), floor(hi)], stored as uint64 bit patterns and cast. */
static ld_status fill_int(ld_tensor *t, ld_rng *rng, ld_value_range r, ld_error *err)
{
    double lo = ceil(r.lo), hi = floor(r.hi), min, max;
    dtype_limits(t->dtype, &min, &max);
    bool wide = t->dtype == LD_DTYPE_INT64 || t->dtype == LD_DTYPE_UINT64;
    if (lo > hi)
        return range_error(err, t, r, "holds no integer");
    if (lo < min || (wide ? hi >= max : hi > max))
        return range_error(err, t, r, "leaves the type's range");
    bool is_signed = ld_dtype_is_signed_int(t->dtype);
    uint64_t ulo = is_signed ? (uint64_t)(int64_t)lo : (uint64_t)lo;
    uint64_t uhi = is_signed ? (uint64_t)(int64_t)hi : (uint64_t)hi;
    uint64_t span = uhi - ulo + 1; /* 0 = all 2^64 values */
    size_t size = ld_dtype_size(t->dtype);
    for (int64_t i = 0; i < t->count; i++) {
        uint64_t u = ulo + ld_rng_below(rng, span);
        uint8_t *dst = (uint8_t *)t->data + (size_t)i * size;
        switch (size) {
        case 1: *dst = (uint8_t)u; break;
        case 2: { uint16_t v = (uint16_t)u; memcpy(dst, &v, 2); break; }
        case 4: { uint32_t v = (uint32_t)u; memcpy(dst, &v, 4); break; }
        default: memcpy(dst, &u, 8); break;
        }
    }
    return LD_OK;
}

ld_status ld_inputs_fill_random(ld_tensor *t, uint64_t seed, ld_value_range range, ld_error *err)
{
    if (!ld_dtype_is_supported(t->dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "input '%s' is a %s tensor: layerdiff "
                            "cannot generate or hold it", t->name, ld_dtype_name(t->dtype));
    if (!isfinite(range.lo) || !isfinite(range.hi) || range.lo > range.hi ||
        !isfinite(range.hi - range.lo))
        return range_error(err, t, range, "is not a finite interval with lo <= hi");
    ld_rng rng;
    ld_rng_for_input(&rng, seed, t->name);
    if (t->dtype == LD_DTYPE_BOOL) {
        for (int64_t i = 0; i < t->count; i++)
            ((uint8_t *)t->data)[i] = (uint8_t)(ld_rng_next(&rng) >> 63);
        return LD_OK;
    }
    if (ld_dtype_is_float(t->dtype)) {
        double min, max;
        dtype_limits(t->dtype, &min, &max);
        if (range.lo < min || range.hi > max)
            return range_error(err, t, range, "leaves the type's finite range");
        return fill_float(t, &rng, range);
    }
    return fill_int(t, &rng, range, err);
}

/* --- parsing ----------------------------------------------------------------------- */

/* Splits text at commas that are not inside [...] into new strings. */
static ld_status split_items(const char *text, const char *option, char ***out, int *n,
                             ld_error *err)
{
    int cap = 1;
    for (const char *p = text; *p; p++)
        cap += *p == ',';
    char **items = calloc((size_t)cap, sizeof *items);
    if (!items)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    int count = 0, depth = 0;
    const char *start = text;
    for (const char *p = text;; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && depth > 0)
            depth--;
        if (*p && (*p != ',' || depth > 0))
            continue;
        size_t len = (size_t)(p - start);
        if (len == 0) {
            ld_inputs_free_strings(items, count);
            return ld_error_set(err, LD_ERR_USAGE, "%s '%s': empty item", option, text);
        }
        if (!(items[count] = strndup(start, len))) {
            ld_inputs_free_strings(items, count);
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        }
        count++;
        if (!*p)
            break;
        start = p + 1;
    }
    *out = items;
    *n = count;
    return LD_OK;
}

/* In messages about one item of several, the whole option value is quoted
 * too: "--val-range '0,1': ... got '0'". */
static const char *quoted_if(int n_items)
{
    return n_items > 1 ? " '" : "";
}

void ld_inputs_free_strings(char **items, int n)
{
    for (int i = 0; items && i < n; i++)
        free(items[i]);
    free(items);
}

ld_status ld_inputs_parse_dims(const char *text, ld_shape *shape)
{
    shape->rank = 0;
    if (strcmp(text, "scalar") == 0)
        return LD_OK;
    const char *p = text;
    for (;;) {
        if (*p < '0' || *p > '9' || shape->rank == LD_MAX_RANK)
            return LD_ERR_USAGE;
        errno = 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (errno)
            return LD_ERR_USAGE;
        shape->dims[shape->rank++] = v;
        if (*end == '\0')
            return LD_OK;
        if (*end != 'x' && *end != 'X')
            return LD_ERR_USAGE;
        p = end + 1;
    }
}

void ld_input_shape_args_free(ld_input_shape_arg *args, int n)
{
    for (int i = 0; args && i < n; i++)
        free(args[i].name);
    free(args);
}

ld_status ld_inputs_parse_shapes(const char *text, ld_input_shape_arg **out, int *n,
                                 ld_error *err)
{
    char **items = NULL;
    int n_items = 0;
    ld_status st = split_items(text, "--input-shapes", &items, &n_items, err);
    if (st != LD_OK)
        return st;
    ld_input_shape_arg *args = calloc((size_t)n_items, sizeof *args);
    if (!args)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; st == LD_OK && i < n_items; i++) {
        char *colon = strrchr(items[i], ':');
        if (!colon || colon == items[i] || ld_inputs_parse_dims(colon + 1, &args[i].shape) != LD_OK) {
            st = ld_error_set(err, LD_ERR_USAGE, "--input-shapes%s%s%s: expected NAME:DIMS such "
                              "as x:1x3x224x224 or batch:2, got '%s'", quoted_if(n_items),
                              n_items > 1 ? text : "", n_items > 1 ? "'" : "", items[i]);
            break;
        }
        if (!(args[i].name = strndup(items[i], (size_t)(colon - items[i]))))
            st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    ld_inputs_free_strings(items, n_items);
    if (st != LD_OK) {
        ld_input_shape_args_free(args, n_items);
        return st;
    }
    *out = args;
    *n = n_items;
    return LD_OK;
}

void ld_input_range_args_free(ld_input_range_arg *args, int n)
{
    for (int i = 0; args && i < n; i++)
        free(args[i].name);
    free(args);
}

/* "[lo,hi]" -> range. */
static bool parse_interval(const char *text, ld_value_range *r)
{
    if (*text != '[')
        return false;
    char *end;
    errno = 0;
    r->lo = strtod(text + 1, &end);
    if (errno || end == text + 1 || *end != ',')
        return false;
    const char *hi = end + 1;
    r->hi = strtod(hi, &end);
    if (errno || end == hi || strcmp(end, "]") != 0)
        return false;
    return isfinite(r->lo) && isfinite(r->hi) && r->lo <= r->hi && isfinite(r->hi - r->lo);
}

ld_status ld_inputs_parse_ranges(const char *text, ld_input_range_arg **out, int *n,
                                 ld_error *err)
{
    char **items = NULL;
    int n_items = 0;
    ld_status st = split_items(text, "--val-range", &items, &n_items, err);
    if (st != LD_OK)
        return st;
    ld_input_range_arg *args = calloc((size_t)n_items, sizeof *args);
    if (!args)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; st == LD_OK && i < n_items; i++) {
        const char *interval = items[i];
        const char *sep = NULL;
        for (const char *next = strstr(items[i], ":["); next; next = strstr(next + 1, ":["))
            sep = next; /* the last ":[": names may hold ':' */
        bool named_ok = true;
        if (sep) {
            interval = sep + 1;
            named_ok = sep != items[i];
            if (named_ok && !(args[i].name = strndup(items[i], (size_t)(sep - items[i])))) {
                st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
                break;
            }
        }
        if (!named_ok || !parse_interval(interval, &args[i].range))
            st = ld_error_set(err, LD_ERR_USAGE, "--val-range%s%s%s: expected [LO,HI] or "
                              "NAME:[LO,HI] with finite LO <= HI, got '%s'", quoted_if(n_items),
                              n_items > 1 ? text : "", n_items > 1 ? "'" : "", items[i]);
    }
    ld_inputs_free_strings(items, n_items);
    if (st != LD_OK) {
        ld_input_range_args_free(args, n_items);
        return st;
    }
    *out = args;
    *n = n_items;
    return LD_OK;
}

/* --- shape resolution --------------------------------------------------------------- */

/* Values given to symbolic dims so far, and where each came from. */
typedef struct binding {
    const char *param;   /* borrowed from the graph */
    int64_t value;
    char source[160];
} binding;

typedef struct bindings {
    binding *items;
    int n;
} bindings;

static binding *find_binding(bindings *b, const char *param)
{
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->items[i].param, param) == 0)
            return &b->items[i];
    return NULL;
}

/* Binds param = value, failing when it already has another value. */
static ld_status bind(bindings *b, const char *param, int64_t value, const char *source,
                      ld_error *err)
{
    binding *old = find_binding(b, param);
    if (old && old->value != value)
        return ld_error_set(err, LD_ERR_USAGE, "symbolic dim '%s' is %" PRId64 " (%s) but %"
                            PRId64 " (%s)", param, old->value, old->source, value, source);
    if (old)
        return LD_OK;
    binding *nb = &b->items[b->n++]; /* capacity: every dim of every input */
    nb->param = param;
    nb->value = value;
    snprintf(nb->source, sizeof nb->source, "%s", source);
    return LD_OK;
}

static bool graph_has_param(const ld_graph *g, const char *param, const char **borrowed)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const ld_type_info *t = &g->values[g->inputs[k]].type;
        for (int d = 0; t->has_shape && d < t->rank; d++)
            if (t->dims[d].param && strcmp(t->dims[d].param, param) == 0) {
                *borrowed = t->dims[d].param;
                return true;
            }
    }
    return false;
}

static int find_input(const ld_graph *g, const char *name)
{
    for (int k = 0; k < g->n_inputs; k++)
        if (strcmp(g->values[g->inputs[k]].name, name) == 0)
            return k;
    return -1;
}

/* Checks a concrete shape against input k's declaration and binds its
 * symbolic dims. `what` says where the shape came from. */
static ld_status check_given_shape(const ld_graph *g, int k, const ld_shape *shape,
                                   const char *what, bindings *b, ld_error *err)
{
    const ld_value *v = &g->values[g->inputs[k]];
    char given[128], declared[160];
    ld_shape_format(shape, given, sizeof given);
    if (!v->type.has_shape)
        return LD_OK;
    ld_inputs_format_declared(&v->type, declared, sizeof declared);
    if (v->type.rank != shape->rank)
        return ld_error_set(err, LD_ERR_INPUT, "input '%s': %s has shape %s (rank %d), the model "
                            "declares %s (rank %d)", v->name, what, given, shape->rank, declared,
                            v->type.rank);
    for (int d = 0; d < shape->rank; d++) {
        const ld_dim *dim = &v->type.dims[d];
        if (dim->value >= 0 && dim->value != shape->dims[d])
            return ld_error_set(err, LD_ERR_INPUT, "input '%s': %s has shape %s, the model "
                                "declares %s (dim %d must be %" PRId64 ")", v->name, what, given,
                                declared, d, dim->value);
        if (dim->value < 0 && dim->param) {
            char source[160];
            snprintf(source, sizeof source, "from %s for input '%s'", what, v->name);
            ld_status st = bind(b, dim->param, shape->dims[d], source, err);
            if (st != LD_OK)
                return st;
        }
    }
    return LD_OK;
}

/* Input k's shape from its declaration and the bindings. */
static ld_status shape_from_declaration(const ld_graph *g, int k, bindings *b, ld_shape *out,
                                        ld_error *err)
{
    const ld_value *v = &g->values[g->inputs[k]];
    if (!v->type.has_shape)
        return ld_error_set(err, LD_ERR_USAGE, "input '%s': the model declares no shape; pass "
                            "--input-shapes %s:DIMS (e.g. %s:1x3x224x224)", v->name, v->name,
                            v->name);
    out->rank = v->type.rank;
    for (int d = 0; d < v->type.rank; d++) {
        const ld_dim *dim = &v->type.dims[d];
        binding *bd = dim->value < 0 && dim->param ? find_binding(b, dim->param) : NULL;
        if (dim->value >= 0)
            out->dims[d] = dim->value;
        else if (bd)
            out->dims[d] = bd->value;
        else if (dim->param)
            return ld_error_set(err, LD_ERR_USAGE, "input '%s': dim %d is symbolic ('%s') and has "
                                "no value; pass --input-shapes %s:N or %s:DIMS", v->name, d,
                                dim->param, dim->param, v->name);
        else
            return ld_error_set(err, LD_ERR_USAGE, "input '%s': dim %d is dynamic (unnamed) and "
                                "has no value; pass --input-shapes %s:DIMS", v->name, d, v->name);
    }
    return LD_OK;
}

/* Applies --input-shapes items: per-dim bindings first, then whole shapes. */
static ld_status apply_shape_args(const ld_graph *g, const ld_input_shape_arg *args, int n_args,
                                  const ld_shape **given, bindings *b, ld_error *err)
{
    for (int i = 0; i < n_args; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(args[i].name, args[j].name) == 0)
                return ld_error_set(err, LD_ERR_USAGE, "--input-shapes names '%s' twice",
                                    args[i].name);
        int k = find_input(g, args[i].name);
        const char *param = NULL;
        if (k >= 0) {
            given[k] = &args[i].shape;
        } else if (graph_has_param(g, args[i].name, &param)) {
            if (args[i].shape.rank != 1)
                return ld_error_set(err, LD_ERR_USAGE, "--input-shapes %s: '%s' is a symbolic "
                                    "dim, give one number (e.g. %s:2)", args[i].name, args[i].name,
                                    args[i].name);
            ld_status st = bind(b, param, args[i].shape.dims[0], "from --input-shapes", err);
            if (st != LD_OK)
                return st;
        } else {
            char names[512];
            ld_inputs_list_names(g, names, sizeof names);
            return ld_error_set(err, LD_ERR_USAGE, "--input-shapes: the model has no input or "
                                "symbolic dim named '%s' (inputs: %s)", args[i].name, names);
        }
    }
    for (int k = 0; k < g->n_inputs; k++) {
        if (!given[k])
            continue;
        ld_status st = check_given_shape(g, k, given[k], "--input-shapes", b, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

ld_status ld_inputs_resolve_shapes(const ld_graph *g, const ld_input_shape_arg *args, int n_args,
                                   const ld_tensor *const *loaded, ld_shape *out, ld_error *err)
{
    int capacity = n_args + 1;
    for (int k = 0; k < g->n_inputs; k++)
        capacity += g->values[g->inputs[k]].type.rank;
    bindings b = {calloc((size_t)capacity, sizeof *b.items), 0};
    const ld_shape **given = calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof *given);
    ld_status st = LD_OK;
    if (!b.items || !given) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = apply_shape_args(g, args, n_args, given, &b, err);
    for (int k = 0; st == LD_OK && loaded && k < g->n_inputs; k++) {
        if (!loaded[k])
            continue;
        const char *name = g->values[g->inputs[k]].name;
        if (given[k] && !ld_shape_equal(given[k], &loaded[k]->shape)) {
            char a[128], c[128];
            st = ld_error_set(err, LD_ERR_USAGE, "input '%s': the loaded tensor has shape %s but "
                              "--input-shapes says %s", name,
                              ld_shape_format(&loaded[k]->shape, a, sizeof a),
                              ld_shape_format(given[k], c, sizeof c));
            break;
        }
        st = check_given_shape(g, k, &loaded[k]->shape, "the loaded tensor", &b, err);
        given[k] = &loaded[k]->shape;
    }
    for (int k = 0; st == LD_OK && k < g->n_inputs; k++) {
        if (given[k])
            out[k] = *given[k];
        else
            st = shape_from_declaration(g, k, &b, &out[k], err);
    }
out:
    free(b.items);
    free(given);
    return st;
}

/* --- helpers shared with inputs_load.c --------------------------------------------------- */

char *ld_inputs_format_declared(const ld_type_info *type, char *buf, size_t size)
{
    if (!type->has_shape) {
        snprintf(buf, size, "unknown");
        return buf;
    }
    if (type->rank == 0) {
        snprintf(buf, size, "scalar");
        return buf;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < type->rank && used < size; d++) {
        const ld_dim *dim = &type->dims[d];
        int n = dim->value >= 0
                    ? snprintf(buf + used, size - used, "%s%" PRId64, d ? "x" : "", dim->value)
                    : snprintf(buf + used, size - used, "%s%s", d ? "x" : "",
                               dim->param ? dim->param : "?");
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

char *ld_inputs_list_names(const ld_graph *g, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < g->n_inputs && used < size; k++) {
        int n = snprintf(buf + used, size - used, "%s'%s'", k ? ", " : "",
                         g->values[g->inputs[k]].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (g->n_inputs == 0)
        snprintf(buf, size, "none");
    return buf;
}
