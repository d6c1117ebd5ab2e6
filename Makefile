# gpureclaim — `make demo` runs the main job, `make check` runs every test that
# needs no GPU. Each installs what it needs first, and only that
# (scripts/install-deps.sh demo / check).
#
# The build is Meson's: each folder's meson.build lists its files and
# registers its tests (docs/build.md). This file only names four build
# folders and runs them quietly:
#   build/        the default compiler (CC), what `make demo` uses
#   build/clang   CC=clang: the trace suite again, and the fuzz targets
#   build/asan    ASan+UBSan (-Db_sanitize=address,undefined)
#   build/tsan    ThreadSanitizer (clang, -Db_sanitize=thread)
# Variables: BUILD (the default build folder), PREFIX (make install),
# PYTHON, FUZZ_ARGS (make fuzz, make fuzz-sim).

BUILD ?= build
PREFIX ?= /usr/local
PYTHON ?= python3
MESON ?= meson
NINJA ?= ninja
FUZZ_ARGS ?= -max_total_time=600

CLANG_BUILD := build/clang
ASAN_BUILD := build/asan
TSAN_BUILD := build/tsan

# Suites run in each build (meson test --suite).
SUITES := layers exports unit cli python cluster metrics trace examples install views docs
CLANG_SUITES := trace fuzz
ASAN_SUITES := unit cli trace examples python
# the core, the driver layer and the simulator (unit); the injection
# library's threads, rings and writer against the fake CUPTI (inject)
TSAN_SUITES := unit inject

# TSan maps its shadow at fixed addresses that a high-entropy ASLR layout
# can collide with: its tests run without address randomisation
# (scripts/run-suites.sh takes WRAP_<label> as meson test's --wrapper).
export WRAP_tsan := setarch $(shell uname -m) -R
export TSAN_OPTIONS ?= halt_on_error=1 second_deadlock_stack=1

.PHONY: all check check-ci demo deps deps-demo install fuzz fuzz-sim fuzz-targets \
	format format-check clean

# ninja's own output (a reconfiguration after a meson.build changed, say)
# goes to meson-logs/ninja.txt; a failing build shows it.
define build
	@$(NINJA) -C $(1) --quiet $(2) >$(1)/meson-logs/ninja.txt 2>&1 || \
		{ cat $(1)/meson-logs/ninja.txt; exit 1; }
endef

all: $(BUILD)/build.ninja
	$(call build,$(BUILD))

# A build folder is set up once (its log in meson-logs/setup.txt); later
# runs of ninja reconfigure it by themselves when a meson.build changes.
# Each rule names its compiler, so one folder never mixes two.
# BUILD_SETUP: more options for the default folder's first setup (`make
# demo` leaves the test suites out, which need cmocka and a C++ compiler;
# check-ci turns them on).
$(BUILD)/build.ninja:
	@bash scripts/meson-setup.sh $(BUILD) "$${CC:-cc}" $(BUILD_SETUP)
$(CLANG_BUILD)/build.ninja:
	@bash scripts/meson-setup.sh $(CLANG_BUILD) clang
$(ASAN_BUILD)/build.ninja:
	@bash scripts/meson-setup.sh $(ASAN_BUILD) "$${CC:-cc}" \
		-Db_sanitize=address,undefined -Doptimization=1
# clang's TSan runtime is linked into programs only: shared libraries
# leave its symbols undefined (b_lundef off)
$(TSAN_BUILD)/build.ninja:
	@bash scripts/meson-setup.sh $(TSAN_BUILD) clang \
		-Db_sanitize=thread -Db_lundef=false -Doptimization=1

deps:
	@bash scripts/install-deps.sh check
deps-demo:
	@bash scripts/install-deps.sh demo

# The README's test command.
check: deps
	@$(MAKE) --no-print-directory check-ci

check-ci: format-check $(BUILD)/build.ninja $(CLANG_BUILD)/build.ninja \
		$(ASAN_BUILD)/build.ninja $(TSAN_BUILD)/build.ninja
	@$(PYTHON) scripts/meson-option.py $(BUILD) tests true || \
		$(MESON) configure $(BUILD) -Dtests=true >/dev/null
	$(call build,$(BUILD))
	@$(NINJA) -C $(BUILD) -n | grep -q 'no work to do' || \
		{ echo "check: a second build of $(BUILD) is not a no-op"; exit 1; }
	$(call build,$(CLANG_BUILD))
	$(call build,$(ASAN_BUILD))
	$(call build,$(TSAN_BUILD))
	@bash scripts/run-suites.sh build/check-summary.txt \
		gcc:$(BUILD):"$(SUITES)" \
		clang:$(CLANG_BUILD):"$(CLANG_SUITES)" \
		asan:$(ASAN_BUILD):"$(ASAN_SUITES)" \
		tsan:$(TSAN_BUILD):"$(TSAN_SUITES)"

# The README's main command. A build folder it sets up first has no test
# suites: the demo needs no cmocka, C++ compiler or pytest.
demo: BUILD_SETUP = -Dtests=false
demo: deps-demo all
	@bash scripts/demo.sh "$(BUILD)"

# The C library, its header and gpureclaim.pc, the command, the injection
# library and the Python package, under PREFIX (DESTDIR honoured); the
# libraries in PREFIX/lib, whatever the platform's habit, so the README's
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig holds everywhere.
install: $(BUILD)/build.ninja
	@$(MESON) configure $(BUILD) -Dprefix=$(abspath $(PREFIX)) -Dlibdir=lib \
		>/dev/null
	$(call build,$(BUILD))
	@$(MESON) install -C $(BUILD) --no-rebuild --quiet \
		$(if $(DESTDIR),--destdir $(DESTDIR))
	@echo "installed under $(DESTDIR)$(abspath $(PREFIX))"

# The libFuzzer targets (build/clang; scripts/fuzz-long.sh runs them).
FUZZ_TARGETS := tests/trace/fuzz_trace_read tests/unit/fuzz_sim_config tests/cli/fuzz_agent_answer
fuzz-targets: $(CLANG_BUILD)/build.ninja
	$(call build,$(CLANG_BUILD),$(FUZZ_TARGETS))

# Open-ended fuzzing of the trace reader, of the simulator's
# GPURECLAIM_SIM parser (FUZZ_ARGS bounds them).
fuzz: fuzz-targets
	@mkdir -p fuzz-corpus-tmp
	$(CLANG_BUILD)/tests/trace/fuzz_trace_read $(FUZZ_ARGS) \
		fuzz-corpus-tmp tests/trace/corpus
fuzz-sim: fuzz-targets
	@mkdir -p fuzz-sim-corpus-tmp
	$(CLANG_BUILD)/tests/unit/fuzz_sim_config $(FUZZ_ARGS) \
		fuzz-sim-corpus-tmp tests/unit/corpus_sim

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format: clean"

clean:
	rm -rf build
