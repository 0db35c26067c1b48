/* layerdiff CLI — `layerdiff inspect` internals, split by file kind so each
 * part can be unit-tested with a FILE* of its own (tests/test_cli_inspect.c). */
#ifndef LAYERDIFF_CLI_INSPECT_H
#define LAYERDIFF_CLI_INSPECT_H

#include <stdbool.h>
#include <stdio.h>

#include "layerdiff/engine.h"
#include "layerdiff/error.h"

typedef enum ld_file_kind {
    LD_FILE_ONNX = 0, /* anything that is not HDF5 is handed to the ONNX loader */
    LD_FILE_HDF5
} ld_file_kind;

typedef struct ld_inspect_options {
    bool json;   /* print JSON (docs/cli.md) instead of text */
    bool layers; /* models: list every node */
    bool color;  /* text: use terminal colours */
} ld_inspect_options;

/* Tells an HDF5 file (signature at offset 0 or at a userblock offset
 * 512, 1024, 2048, ...) from anything else. Fails with LD_ERR_IO when the
 * file cannot be opened or is a directory. */
ld_status ld_inspect_detect(const char *path, ld_file_kind *kind, ld_error *err);

/* Loads the ONNX model at path and prints its summary to out. */
ld_status ld_inspect_model(FILE *out, const char *path, const ld_inspect_options *opts,
                           ld_error *err);

/* Loads the ONNX model at path and prints the emulated engine's precision
 * plan under cfg (cli/inspect_plan.c); the plan's warnings go to stderr. */
ld_status ld_inspect_plan(FILE *out, const char *path, const ld_engine_config *cfg,
                          const ld_inspect_options *opts, ld_error *err);

/* Opens the layerdiff dump at path and prints its runs and tensors to out. */
ld_status ld_inspect_dump(FILE *out, const char *path, const ld_inspect_options *opts,
                          ld_error *err);

#endif
