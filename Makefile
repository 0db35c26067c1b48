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

.PHONY: all help demo test unit-test e2e-test exhaustive-test fixtures clean deps conformance
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
test: $(UNIT_BINS) $(EXH_BINS) $(ASAN_BIN) $(BIN) $(PLUGINS) ## build and run every test (unit, exhaustive, end-to-end)
	@bash scripts/run-tests.sh --build $(BUILD) $(UNIT_BINS) $(EXH_BINS) -- tests/e2e/test_*.sh

unit-test: $(UNIT_BINS) ## run the cmocka unit tests only
	@bash scripts/run-tests.sh --build $(BUILD) $(UNIT_BINS) --

e2e-test: $(ASAN_BIN) $(BIN) $(PLUGINS) ## run the end-to-end CLI tests only
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

# --- fixtures and demo ---------------------------------------------------------------
fixtures: ## regenerate fixtures/ with scripts/gen-fixtures.py (Debian's python3-onnx)
	$(PYTHON) scripts/gen-fixtures.py fixtures

demo: $(BIN) ## build and run the main job on the bundled default model
	@bash scripts/demo.sh $(BIN)

clean: ## remove build/
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
