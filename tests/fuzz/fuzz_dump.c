/* layerdiff fuzz target: the HDF5 dump reader. The reader takes a path (HDF5
 * opens files itself), so each input is written to a file in the sandbox
 * (tmpfs when /dev/shm exists), opened with ld_dump_open, every tensor of
 * /inputs and of every run is read, and the file is inspected as text and
 * JSON the way `layerdiff inspect` does.
 *
 * HDF5 itself is not built with coverage instrumentation, so libFuzzer is
 * guided by layerdiff's side of the reader only; HDF5's own diagnostics are
 * silenced by the reader (ld_dump_h5_quiet), and crashes inside HDF5 are
 * reported like any other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/inspect.h"
#include "layerdiff/dump.h"
#include "tests/fuzz/support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_group(const ld_dump *d, int run)
{
    int n = ld_dump_tensor_count(d, run);
    for (int i = 0; i < n; i++) {
        const ld_dump_tensor_meta *m = run < 0 ? ld_dump_input_meta(d, i)
                                               : ld_dump_tensor_meta_at(d, run, i);
        if (!m || !m->name)
            fuzz_fail("indexed tensor without metadata", NULL);
        if (ld_dump_find_tensor(d, run, m->name) != i)
            fuzz_fail("a tensor is not found by its own name", NULL);
        ld_tensor *t = NULL;
        ld_error err;
        ld_error_clear(&err);
        ld_status st = ld_dump_read_tensor(d, run, i, &t, &err);
        fuzz_check_status(st, &err, "ld_dump_read_tensor");
        if (st == LD_OK && (t->dtype != m->dtype || !ld_shape_equal(&t->shape, &m->shape)))
            fuzz_fail("tensor read with another dtype or shape than indexed", NULL);
        ld_tensor_destroy(t);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("fuzz.h5", data, size);
    ld_dump *d = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_dump_open(&d, path, &err);
    fuzz_check_status(st, &err, "ld_dump_open");
    if (st != LD_OK) {
        if (d)
            fuzz_fail("failed open left a dump behind", &err);
        return 0;
    }
    read_group(d, -1);
    for (int r = 0; r < ld_dump_run_count(d); r++) {
        const ld_dump_run_info *info = ld_dump_run(d, r);
        if (!info || !info->name || ld_dump_find_run(d, info->name) != r)
            fuzz_fail("a run is not found by its own name", NULL);
        read_group(d, r);
    }
    ld_dump_close(d);

    for (int json = 0; json < 2; json++) {
        ld_inspect_options opts = {.json = json};
        st = ld_inspect_dump(fuzz_null_output(), path, &opts, &err);
        if (st != LD_OK)
            fuzz_fail("inspect failed on a dump ld_dump_open accepted", &err);
    }
    return 0;
}
