# layerdiff — one non-recursive Makefile. `make help` lists the targets.
#
# Sources are found by folder: every .c file under core/ onnx/ backends/ dump/
# compare/ report/ goes into liblayerdiff.a, cli/ makes the binary, and each
# tests/test_<module>.c is its own cmocka program. Adding a file needs no edit
# here. Two builds share the sources:
#   build/          release (-O2), what `make`, `make demo` and `make bench` use
#   build/asan/     AddressSanitizer + UBSan, what `make test` runs
# tests/exhaustive_*.c loop over all 2^32 floats; they are built -O2 without
# sanitizers (which would make them minutes instead of seconds) and linked to
# the release library.

BUILD      ?= build
PYTHON     ?= /usr/bin/python3
VERSION    := 0.1.0
OPT        ?= -O2
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

NO_CONFIG_GOALS := help clean
ifeq ($(filter-out $(NO_CONFIG_GOALS),$(or $(MAKECMDGOALS),all)),)
else
-include $(BUILD)/config.mk
endif

# Quiet by default (`make V=1` prints full commands).
ifeq ($(V),1)
Q :=
else
Q := @
endif

WARNINGS   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=c11 $(WARNINGS) -ffp-contract=off -fopenmp -g -D_GNU_SOURCE \
               -DLAYERDIFF_VERSION='"$(VERSION)"' -Iinclude -I. -I$(BUILD)/gen -MMD -MP
CFLAGS     ?=
REL_CFLAGS  = $(BASE_CFLAGS) $(OPT) $(DEP_CFLAGS) $(CFLAGS)
ASAN_CFLAGS = $(BASE_CFLAGS) -O1 $(SAN_FLAGS) $(DEP_CFLAGS) $(CFLAGS)

LIB_DIRS   := core onnx backends backends/kernels dump compare report
LIB_SRCS   := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
CLI_SRCS   := $(wildcard cli/*.c)
UNIT_SRCS  := $(wildcard tests/test_*.c)
EXH_SRCS   := $(wildcard tests/exhaustive_*.c)
TEST_SUPPORT_SRCS := $(wildcard tests/support/*.c)
PLUGIN_SRCS := $(wildcard tests/plugins/*.c)

# The binary exports the whole library (-rdynamic + whole archive) so backend
# plugins loaded with dlopen can call any public function.
WHOLE_ARCHIVE    := -Wl,--whole-archive
NO_WHOLE_ARCHIVE := -Wl,--no-whole-archive

PROTO_C    := $(BUILD)/gen/onnx/onnx.pb-c.c
PROTO_H    := $(BUILD)/gen/onnx/onnx.pb-c.h

REL_LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx.pb-c.o
ASAN_LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/asan/obj/%.o) $(BUILD)/asan/obj/gen/onnx.pb-c.o
REL_CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
ASAN_CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/asan/obj/%.o)
# The CLI minus main(): linked into unit tests so tests/test_cli_*.c can call it.
ASAN_CLI_LIB_OBJS := $(filter-out $(BUILD)/asan/obj/cli/main.o,$(ASAN_CLI_OBJS))
SUPPORT_OBJS  := $(TEST_SUPPORT_SRCS:%.c=$(BUILD)/asan/obj/%.o)

LIB        := $(BUILD)/liblayerdiff.a
ASAN_LIB   := $(BUILD)/asan/liblayerdiff.a
BIN        := $(BUILD)/layerdiff
ASAN_BIN   := $(BUILD)/asan/layerdiff
UNIT_BINS  := $(UNIT_SRCS:tests/%.c=$(BUILD)/asan/tests/%)
EXH_BINS   := $(EXH_SRCS:tests/%.c=$(BUILD)/tests/%)
PLUGINS    := $(PLUGIN_SRCS:tests/plugins/%.c=$(BUILD)/plugins/%.so)
# The same plugins without sanitizers, for the valgrind runs.
VG_PLUGINS := $(PLUGIN_SRCS:tests/plugins/%.c=$(BUILD)/valgrind/plugins/%.so)

.PHONY: all help demo test unit-test e2e-test exhaustive-test fixtures clean deps conformance bench
.DEFAULT_GOAL := all
# Keep intermediate objects (tests/support) instead of rebuilding them every time.
.SECONDARY:

all: $(BIN) $(LIB) ## build build/layerdiff and build/liblayerdiff.a (release)

help: ## list the targets
	@echo "layerdiff $(VERSION) — make targets:"
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-zA-Z_-]+):.*## (.*)/  \1\t\2/' | expand -t 20

deps: ## install the Debian packages the build and tests need
	bash scripts/install-deps.sh

$(BUILD)/config.mk: scripts/configure.sh scripts/install-deps.sh
	@mkdir -p $(BUILD)
	@bash scripts/configure.sh > $@.tmp && mv $@.tmp $@

# --- generated ONNX protobuf code -------------------------------------------
$(PROTO_C) $(PROTO_H) &: $(BUILD)/config.mk
	@mkdir -p $(BUILD)/gen
	@echo '  PROTO $@'
	$(Q)$(PROTOC_C) --c_out=$(BUILD)/gen -I$(ONNX_PROTO_DIR) $(ONNX_PROTO)

# Generated code is not ours to lint: compile it without -Werror.
$(BUILD)/obj/gen/onnx.pb-c.o: $(PROTO_C)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) -std=c11 -O2 -g -w $(DEP_CFLAGS) -I$(BUILD)/gen -c $< -o $@
$(BUILD)/asan/obj/gen/onnx.pb-c.o: $(PROTO_C)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) -std=c11 -O1 -g -w $(SAN_FLAGS) $(DEP_CFLAGS) -I$(BUILD)/gen -c $< -o $@

# --- release build ------------------------------------------------------------
$(BUILD)/obj/%.o: %.c $(BUILD)/config.mk | $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) -c $< -o $@

$(LIB): $(REL_LIB_OBJS)
	@rm -f $@
	@echo '  AR    $@'
	$(Q)ar rcs $@ $^

$(BIN): $(REL_CLI_OBJS) $(LIB)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) -o $@ $(REL_CLI_OBJS) $(WHOLE_ARCHIVE) $(LIB) $(NO_WHOLE_ARCHIVE) $(DEP_LIBS) -rdynamic

$(BUILD)/tests/exhaustive_%: tests/exhaustive_%.c $(LIB)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) $(TEST_CFLAGS) -pthread -o $@ $< $(LIB) $(TEST_LIBS) $(DEP_LIBS)

# --- sanitizer build (tests) ----------------------------------------------------
$(BUILD)/asan/obj/%.o: %.c $(BUILD)/config.mk | $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(ASAN_CFLAGS) $(TEST_CFLAGS) -c $< -o $@

$(ASAN_LIB): $(ASAN_LIB_OBJS)
	@rm -f $@
	@echo '  AR    $@'
	$(Q)ar rcs $@ $^

$(ASAN_BIN): $(ASAN_CLI_OBJS) $(ASAN_LIB)
	@echo '  CC    $@'
	$(Q)$(CC) $(ASAN_CFLAGS) -o $@ $(ASAN_CLI_OBJS) $(WHOLE_ARCHIVE) $(ASAN_LIB) $(NO_WHOLE_ARCHIVE) $(DEP_LIBS) -rdynamic

$(BUILD)/asan/tests/%: $(BUILD)/asan/obj/tests/%.o $(SUPPORT_OBJS) $(ASAN_CLI_LIB_OBJS) $(ASAN_LIB)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(ASAN_CFLAGS) -o $@ $< $(SUPPORT_OBJS) $(ASAN_CLI_LIB_OBJS) $(ASAN_LIB) $(TEST_LIBS) $(DEP_LIBS)

# Backend plugins built by tests are loaded into the sanitized binary.
$(BUILD)/plugins/%.so: tests/plugins/%.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(BASE_CFLAGS) -O1 $(SAN_FLAGS) -fPIC -shared -o $@ $<

# --- tests ------------------------------------------------------------------------
# Last step: memcheck on the release binary over CI's subset (scripts/valgrind.sh).
test: $(UNIT_BINS) $(EXH_BINS) $(ASAN_BIN) $(BIN) $(PLUGINS) $(VG_PLUGINS) $(BUILD)/bench/fma_peak $(BUILD)/bench/hdf5_write_loop ## build and run every test (unit, exhaustive, end-to-end, then valgrind on a subset)
	@status=0; \
	  bash scripts/run-tests.sh --build $(BUILD) $(UNIT_BINS) $(EXH_BINS) -- tests/e2e/test_*.sh || status=1; \
	  echo; echo "=== valgrind memcheck (VALGRIND_SUBSET=ci)"; \
	  bash scripts/valgrind.sh --build $(BUILD) --subset ci || status=1; \
	  exit $$status

unit-test: $(UNIT_BINS) ## run the cmocka unit tests only
	@bash scripts/run-tests.sh --build $(BUILD) $(UNIT_BINS) --

e2e-test: $(ASAN_BIN) $(BIN) $(PLUGINS) $(BUILD)/bench/fma_peak $(BUILD)/bench/hdf5_write_loop ## run the end-to-end CLI tests only
	@bash scripts/run-tests.sh --build $(BUILD) -- tests/e2e/test_*.sh

exhaustive-test: $(EXH_BINS) ## run the exhaustive 2^32 rounding checks only
	@bash scripts/run-tests.sh --build $(BUILD) $(EXH_BINS) --

# --- conformance ------------------------------------------------------------------------
ONNX_TESTDATA ?= /usr/share/libonnx-testdata/data
CONFORMANCE_DIRS := $(addprefix $(ONNX_TESTDATA)/,node pytorch-converted pytorch-operator simple)

conformance: $(BIN) ## run Debian's ONNX backend tests; results in build/conformance.txt, passing list in build/conformance-pass.txt
	@$(BIN) conformance $(CONFORMANCE_DIRS) --write-pass-list $(BUILD)/conformance-pass.txt \
	    > $(BUILD)/conformance.txt; status=$$?; \
	  grep -vE '^PASS ' $(BUILD)/conformance.txt; \
	  echo "conformance: full log in $(BUILD)/conformance.txt, passing tests in $(BUILD)/conformance-pass.txt"; \
	  test $$status -le 1

# --- fuzzing (libFuzzer) ------------------------------------------------------------
# tests/fuzz/fuzz_<target>.c are libFuzzer targets built with Debian's clang into
# $(BUILD)/fuzz/, linked to their own copy of the library and CLI compiled with
# coverage instrumentation and ASan/UBSan (no -Werror: gcc is the lint compiler).
# scripts/fuzz.sh runs each target FUZZ_SECONDS seconds (0: build only) from seed
# corpora made out of the fixtures, keeping what it finds in the git-ignored
# fuzz-corpus/; FUZZ_TARGETS=onnx_model,npy picks targets. Results:
# docs/reliability.md.
FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS  ?=
FUZZ_SRCS     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS     := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS    = -std=c11 -Wall -Wextra -Wno-unused-parameter -Wno-pass-failed -ffp-contract=off -fopenmp -g -O1 \
                 -D_GNU_SOURCE -DLAYERDIFF_VERSION='"$(VERSION)"' -Iinclude -I. -I$(BUILD)/gen \
                 -MMD -MP $(FUZZ_SAN) $(DEP_CFLAGS)
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/fuzz/obj/%.o) $(BUILD)/fuzz/obj/gen/onnx.pb-c.o
FUZZ_CLI_OBJS := $(filter-out $(BUILD)/fuzz/obj/cli/main.o,$(CLI_SRCS:%.c=$(BUILD)/fuzz/obj/%.o))
FUZZ_LIB      := $(BUILD)/fuzz/liblayerdiff.a

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS) ## build the libFuzzer targets (tests/fuzz/) into build/fuzz/ with clang

fuzz: $(FUZZ_BINS) $(BIN) ## run each fuzz target FUZZ_SECONDS (60) s on seeds from the fixtures; fails on a crash
	@bash scripts/fuzz.sh --build $(BUILD) --seconds $(FUZZ_SECONDS) --targets "$(FUZZ_TARGETS)" $(FUZZ_BINS)

$(BUILD)/fuzz/obj/%.o: %.c $(BUILD)/config.mk | $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo '  CLANG $@'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

# clang 14 lacks __builtin_cpu_supports("f16c") and ("avx512fp16"), which the
# rounding dispatcher uses: gcc compiles it, uninstrumented (it parses no input).
$(BUILD)/fuzz/obj/core/round.o: core/round.c $(BUILD)/config.mk | $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) -c $< -o $@

# clang 14 at -O1 spends minutes of CPU on each unrolled direct-convolution
# kernel file once AddressSanitizer instruments it (measured on the Zen 3:
# conv_direct_avx2.c 350 s with ASan+UBSan, over 600 s adding the coverage
# counters; 13 s with UBSan alone). At -O0 the same sanitizers and coverage
# take 2 s: these files are compiled -O0 (FUZZ_CFLAGS' later -O0 wins), so
# they keep every check and only run slower on the fuzzers' small models.
FUZZ_O0_SRCS := backends/kernels/conv_direct_avx2.c backends/kernels/conv_direct_avx512.c
$(FUZZ_O0_SRCS:%.c=$(BUILD)/fuzz/obj/%.o): $(BUILD)/fuzz/obj/%.o: %.c $(BUILD)/config.mk | $(PROTO_H)
	@mkdir -p $(dir $@)
	@echo '  CLANG $@ (-O0)'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -O0 -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/obj/gen/onnx.pb-c.o: $(PROTO_C)
	@mkdir -p $(dir $@)
	@echo '  CLANG $@'
	$(Q)$(FUZZ_CC) -std=c11 -O1 -g -w $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(DEP_CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	@rm -f $@
	@echo '  AR    $@'
	$(Q)ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: $(BUILD)/fuzz/obj/tests/fuzz/fuzz_%.o $(BUILD)/fuzz/obj/tests/fuzz/support.o $(FUZZ_CLI_OBJS) $(FUZZ_LIB)
	@echo '  CLANG $@'
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/fuzz/obj/tests/fuzz/support.o \
	    $(FUZZ_CLI_OBJS) $(FUZZ_LIB) $(DEP_LIBS)

# --- benchmark --------------------------------------------------------------------------
# bench/fma_peak measures the FMA peak the conv/gemm figures are divided by;
# its vector loops carry target attributes, so it needs no -m flags.
FMA_PEAK := $(BUILD)/bench/fma_peak

$(FMA_PEAK): bench/fma_peak.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) -o $@ $<

# bench/hdf5_write_loop writes the bytes of a dump in one plain HDF5 loop: the
# yardstick of the dump writer's speed during `run --dump` (issue 5).
HDF5_WRITE_LOOP := $(BUILD)/bench/hdf5_write_loop

$(HDF5_WRITE_LOOP): bench/hdf5_write_loop.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) -o $@ $< $(DEP_LIBS)

# bench/compare_throughput times ld_compare_tensors on float32 pairs against
# memcpy of the same bytes (issue 5's comparator goal); linked to the release
# library like the binary.
COMPARE_THROUGHPUT := $(BUILD)/bench/compare_throughput

$(COMPARE_THROUGHPUT): bench/compare_throughput.c $(LIB)
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(REL_CFLAGS) -o $@ $< $(LIB) $(DEP_LIBS)

bench: $(BIN) $(FMA_PEAK) $(HDF5_WRITE_LOOP) $(COMPARE_THROUGHPUT) ## benchmark: FMA peak, run time, conv/gemm GFLOP/s, RSS with --dump; writes build/bench.json
	@bash scripts/bench.sh --build $(BUILD)

# --- valgrind ---------------------------------------------------------------------------
# scripts/valgrind.sh runs the end-to-end tests on the release binary (-O2 -g)
# under valgrind memcheck (zero errors, zero definite/indirect leaks; third-party
# suppressions in tests/valgrind.supp). Backend plugins are rebuilt without
# sanitizers for it. VALGRIND_SUBSET=ci is the few-minute subset `make test` ends with.
VALGRIND_SUBSET ?= all

.PHONY: valgrind
valgrind: $(BIN) $(VG_PLUGINS) ## run the end-to-end tests on build/layerdiff under valgrind memcheck (VALGRIND_SUBSET=ci: CI's subset)
	@bash scripts/valgrind.sh --build $(BUILD) --subset $(VALGRIND_SUBSET)

$(BUILD)/valgrind/plugins/%.so: tests/plugins/%.c $(BUILD)/config.mk
	@mkdir -p $(dir $@)
	@echo '  CC    $@'
	$(Q)$(CC) $(BASE_CFLAGS) -O1 -fPIC -shared -o $@ $<

# --- fixtures and demo ---------------------------------------------------------------
fixtures: ## regenerate fixtures/ with scripts/gen-fixtures.py and gen-scenarios.py (Debian's python3-onnx)
	$(PYTHON) scripts/gen-fixtures.py fixtures
	$(PYTHON) scripts/gen-scenarios.py fixtures

demo: $(BIN) ## build and run the main job on the bundled default model
	@bash scripts/demo.sh $(BIN)

clean: ## remove build/
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
