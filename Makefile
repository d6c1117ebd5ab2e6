# gpureclaim — `make demo` runs the main job, `make check` runs every test that
# needs no GPU. Both install what they need first (scripts/install-deps.sh).
#
# Variables: BUILD (output folder), CC, SAN=1 (ASan+UBSan build), TSAN=1
# (ThreadSanitizer build, clang), PYTHON.
# Each part of the tree adds its own rules in its build.mk; this file holds
# what they share.

BUILD ?= build
CC ?= cc
PYTHON ?= python3
SAN ?=
TSAN ?=
# Prefix of the test programs a run starts (the TSan run sets it).
TEST_WRAP ?=

CSTD := -std=c11 -D_GNU_SOURCE
WARN := -Wall -Wextra -Werror
OPT ?= -O2
ifeq ($(SAN),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT := -O1
endif
ifeq ($(TSAN),1)
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
OPT := -O1
# TSan maps its shadow at fixed addresses that a high-entropy ASLR layout
# can collide with: its runs go without address randomisation.
TEST_WRAP := setarch $(shell uname -m) -R
export TSAN_OPTIONS ?= halt_on_error=1 second_deadlock_stack=1
endif
CFLAGS := $(CSTD) $(WARN) $(OPT) -g -fPIC -fvisibility=hidden \
	-Iinclude -Isrc -Isrc/driver $(SANFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := $(SANFLAGS) $(EXTRA_LDFLAGS)
LDLIBS := -ldl -lpthread

# Filled by the build.mk files.
ALL_TARGETS :=
# Test runs (phony targets) made by `make check` on the normal build.
CHECK_RUNS :=
# Test runs made again on the ASan+UBSan build.
SAN_RUNS :=
# Test runs made again on the ThreadSanitizer build (clang).
TSAN_RUNS :=

.PHONY: all check check-ci demo deps format format-check clean
all: build-all

include src/out/build.mk
include src/build.mk
include sim/build.mk
include trace/build.mk
include cli/build.mk
include tests/build.mk
-include python/build.mk
-include examples/build.mk
-include bench/build.mk

build-all: $(ALL_TARGETS)
.PHONY: build-all

# Includes and calls go down the layers only, without loops (docs/naming.md).
check-layers: build-all
	@$(PYTHON) scripts/check-layers.py --objects $(BUILD)/obj
.PHONY: check-layers
CHECK_RUNS += check-layers

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

deps:
	@bash scripts/install-deps.sh

# The README's test command.
check: deps
	$(MAKE) check-ci

check-ci: format-check
	$(MAKE) all
	$(MAKE) CC=clang BUILD=build/clang all
	$(MAKE) $(CHECK_RUNS)
	@# the injection library's stack walks depend on the compiler's frames
	$(MAKE) CC=clang BUILD=build/clang test-trace
	$(MAKE) SAN=1 BUILD=build/asan $(SAN_RUNS)
	$(MAKE) CC=clang TSAN=1 BUILD=build/tsan $(TSAN_RUNS)
	@echo "make check: all passed"

# The README's main command.
demo: deps
	$(MAKE) all
	@bash scripts/demo.sh "$(BUILD)"

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format: clean"

clean:
	rm -rf build
