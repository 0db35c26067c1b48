/* `layerdiff inspect FILE`: what is in a model or a dump. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/inspect.h"
#include "cli/options.h"
#include "cli/term.h"

#define CMD "inspect"

/* Option values and the table that parses and documents them. run resets
 * the values first, so the command can run more than once (tests do). */
static struct {
    bool json;
    bool layers;
    bool engine;
    ld_cli_engine_values flags;
} inspect_values;

static const ld_cli_option inspect_options[] = {
    {"json", 'j', LD_OPT_FLAG, &inspect_values.json, NULL,
     "print JSON instead of text (shape: docs/cli.md)"},
    {"layers", 'l', LD_OPT_FLAG, &inspect_values.layers, NULL, "models: also list every node"},
    {"engine", 0, LD_OPT_FLAG, &inspect_values.engine, NULL,
     "models: print the emulated engine's precision plan under the engine flags below"},
    LD_CLI_ENGINE_OPTIONS(inspect_values.flags),
};
#define N_INSPECT_OPTIONS ((int)(sizeof inspect_options / sizeof inspect_options[0]))

static void inspect_help(FILE *out);

static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

ld_status ld_inspect_detect(const char *path, ld_file_kind *kind, ld_error *err)
{
    ld_status st = LD_OK;
    FILE *f = NULL;
    struct stat sb;
    *kind = LD_FILE_ONNX;
    if (stat(path, &sb) != 0)
        return ld_error_set(err, LD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return ld_error_set(err, LD_ERR_IO, "'%s' is a directory, not a model or dump", path);
    f = fopen(path, "rb");
    if (!f)
        return ld_error_set(err, LD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    /* HDF5 puts its superblock at 0 or after a user block of 512 * 2^k bytes. */
    for (int64_t offset = 0; offset + 8 <= (int64_t)sb.st_size;
         offset = offset == 0 ? 512 : offset * 2) {
        unsigned char sig[8];
        if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(sig, 1, sizeof sig, f) != sizeof sig)
            break;
        if (memcmp(sig, hdf5_signature, sizeof sig) == 0) {
            *kind = LD_FILE_HDF5;
            break;
        }
    }
    if (ferror(f))
        st = ld_error_set(err, LD_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    fclose(f);
    return st;
}

/* --engine: the precision plan of a model. */
static ld_status inspect_engine(const char *path, ld_file_kind kind,
                                const ld_inspect_options *io, ld_error *err)
{
    const char *flag = ld_cli_engine_first_flag(&inspect_values.flags);
    if (!inspect_values.engine)
        return ld_cli_usage_error(err, CMD, "%s is an engine flag: add --engine to print the "
                                  "precision plan it gives", flag);
    if (kind == LD_FILE_HDF5)
        return ld_cli_usage_error(err, CMD, "--engine needs an ONNX model, and '%s' is an HDF5 "
                                  "dump", path);
    if (inspect_values.layers)
        return ld_cli_usage_error(err, CMD, "--engine already lists every layer; drop --layers");
    ld_engine_config cfg;
    ld_status st = ld_cli_engine_config(CMD, &inspect_values.flags, &cfg, err);
    if (st != LD_OK)
        return st;
    st = ld_inspect_plan(stdout, path, &cfg, io, err);
    ld_engine_config_clear(&cfg);
    return st;
}

static ld_status inspect_run(int argc, char **argv, ld_error *err)
{
    memset(&inspect_values, 0, sizeof inspect_values);
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, inspect_options, N_INSPECT_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (args.help) {
        inspect_help(stdout);
        return LD_OK;
    }
    st = ld_cli_expect_positionals(CMD, &args, 1, 1, "FILE, an .onnx model or .h5 dump", err);
    if (st != LD_OK)
        return st;

    const char *path = args.positional[0];
    ld_file_kind kind;
    st = ld_inspect_detect(path, &kind, err);
    if (st != LD_OK)
        return st;
    ld_inspect_options io = {.json = inspect_values.json, .layers = inspect_values.layers};
    if (!io.json)
        io.color = ld_term_use_color(stdout);
    if (inspect_values.engine || ld_cli_engine_first_flag(&inspect_values.flags))
        return inspect_engine(path, kind, &io, err);
    if (kind == LD_FILE_HDF5)
        return ld_inspect_dump(stdout, path, &io, err);
    return ld_inspect_model(stdout, path, &io, err);
}

static void inspect_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff inspect FILE [--json] [--layers]\n"
            "       layerdiff inspect MODEL.onnx --engine [engine flags] [--json]\n"
            "\n"
            "Shows what is in an ONNX model or a layerdiff HDF5 dump (told apart by the\n"
            "file's signature, not its name).\n"
            "\n"
            "For a model: producer, IR version, opsets, inputs and outputs with their\n"
            "types and shapes (symbolic dims by name), node count per operator,\n"
            "parameter count and size, and notes on parts layerdiff cannot compute.\n"
            "For a dump: file attributes, model inputs, and per run every tensor with\n"
            "its dtype, shape, producing node, precision and overflow counters.\n"
            "With --engine: the emulated engine's precision plan for the model under\n"
            "the engine flags (the same as `layerdiff run --backends emulated` takes):\n"
            "every layer, the precision it computes in, its output type and why\n"
            "(docs/numerics.md, \"Emulated engine\"). Warnings go to stderr.\n"
            "\n");
    ld_cli_print_options(out, inspect_options, N_INSPECT_OPTIONS);
    fprintf(out,
            "\n"
            "Examples:\n"
            "  layerdiff inspect model.onnx\n"
            "  layerdiff inspect model.onnx --layers --json | jq .op_counts\n"
            "  layerdiff inspect run.h5\n"
            "  layerdiff inspect model.onnx --engine --fp16 --precision-constraints obey \\\n"
            "      --layer-precisions 'op:Softmax:fp32,/head/*:fp32'\n");
}

const ld_cli_command ld_cmd_inspect = {
    .name = CMD,
    .summary = "show a model's or a dump's contents (inputs, operators, tensors)",
    .run = inspect_run,
    .help = inspect_help,
};
