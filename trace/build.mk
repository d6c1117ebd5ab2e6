# The trace part: its three folders (the log format, the injection
# library, the reader), their tests and the reader's fuzz target.
include trace/format/build.mk
include trace/inject/build.mk
include trace/read/build.mk

# ---- tests (no GPU): tests/trace/ ----
TRACE_TEST_DIR := $(BUILD)/tests/trace

# The reader with the log writer; the output toolkit from the static core.
$(TRACE_TEST_DIR)/test_trace_log: $(BUILD)/obj/tests/trace/test_trace_log.o \
		$(BUILD)/obj/tests/trace/check.o \
		$(TRACE_READ_OBJS) $(BUILD)/obj/trace/inject/log_write.o \
		$(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# A stand-in for libcupti that lets a test drive the callbacks.
$(TRACE_TEST_DIR)/libcupti-fake.so: $(BUILD)/obj/tests/trace/fake_cupti.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TRACE_TEST_DIR)/test_inject: $(BUILD)/obj/tests/trace/test_inject.o \
		$(BUILD)/obj/tests/trace/check.o $(TRACE_READ_OBJS) \
		$(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -rdynamic -o $@ $^ $(LDLIBS)

# The interposer on the simulated driver: a program linked with its
# libcuda, and a library preloaded before the tracer (RTLD_NEXT).
$(TRACE_TEST_DIR)/test_preload: $(BUILD)/obj/tests/trace/test_preload.o \
		$(BUILD)/obj/tests/trace/check.o $(TRACE_READ_OBJS) \
		$(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TRACE_TEST_DIR)/test_linked: $(BUILD)/obj/tests/trace/test_linked.o \
		$(BUILD)/sim/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(BUILD)/sim -l:libcuda.so.1 \
		-Wl,-rpath,$(abspath $(BUILD)/sim)

$(TRACE_TEST_DIR)/libnext.so: $(BUILD)/obj/tests/trace/next_lib.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^

# A setuid program's stand-in and a library planted for it to load
# (tests/trace/test_setuid.sh).
$(TRACE_TEST_DIR)/setuid_host: $(BUILD)/obj/tests/trace/setuid_host.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TRACE_TEST_DIR)/libplanted.so: $(BUILD)/obj/tests/trace/planted_lib.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

TRACE_TESTS := $(TRACE_TEST_DIR)/test_trace_log $(TRACE_TEST_DIR)/test_inject \
	$(TRACE_TEST_DIR)/libcupti-fake.so $(TRACE_TEST_DIR)/test_preload \
	$(TRACE_TEST_DIR)/test_linked $(TRACE_TEST_DIR)/libnext.so \
	$(TRACE_TEST_DIR)/setuid_host $(TRACE_TEST_DIR)/libplanted.so
ALL_TARGETS += $(TRACE_TESTS)

test-trace: $(TRACE_TESTS) $(TRACE_LIB) $(SIM_LIBS) $(BUILD)/gpureclaim \
		$(BUILD)/bench/trace_churn $(BUILD)/bench/trace_gen
	$(TRACE_TEST_DIR)/test_trace_log
	$(TRACE_TEST_DIR)/test_inject $(abspath $(TRACE_LIB)) \
		$(abspath $(TRACE_TEST_DIR)/libcupti-fake.so)
	$(TRACE_TEST_DIR)/test_preload $(abspath $(TRACE_LIB)) \
		$(abspath $(BUILD)/sim) $(abspath $(TRACE_TEST_DIR)/test_linked) \
		$(abspath $(TRACE_TEST_DIR)/libnext.so) \
		$(abspath $(TRACE_TEST_DIR)/libcupti-fake.so)
	PYTHON=$(PYTHON) bash tests/trace/test_cli.sh $(BUILD)
	bash tests/trace/test_setuid.sh $(BUILD)
.PHONY: test-trace
CHECK_RUNS += test-trace
SAN_RUNS += test-trace

# The injection library alone (the TSan run: its threads, rings and
# writer against the fake CUPTI).
test-inject: $(TRACE_TEST_DIR)/test_inject $(TRACE_TEST_DIR)/libcupti-fake.so \
		$(TRACE_LIB)
	$(TEST_WRAP) $(TRACE_TEST_DIR)/test_inject $(abspath $(TRACE_LIB)) \
		$(abspath $(TRACE_TEST_DIR)/libcupti-fake.so)
.PHONY: test-inject
TSAN_RUNS += test-inject

# ---- fuzzing the reader and every rendering (libFuzzer; clang only) ----
# The reader alone (its reports and exports included) with the output
# toolkit: nothing of the CLI.
FUZZ_DIR := build/fuzz
FUZZ_BIN := $(FUZZ_DIR)/fuzz_trace_read
FUZZ_SRCS := tests/trace/fuzz_trace_read.c $(TRACE_READ_SRCS) $(OUT_SRCS)
FUZZ_RUNS ?= 20000

$(FUZZ_BIN): $(FUZZ_SRCS) $(wildcard trace/*/*.h src/out/*.h)
	@mkdir -p $(dir $@)
	clang $(CSTD) $(WARN) -O1 -g -Iinclude -Isrc -Isrc/driver \
		-fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -o $@ $(FUZZ_SRCS)

# `make fuzz`: open-ended (FUZZ_ARGS="-max_total_time=600" to bound it).
fuzz: $(FUZZ_BIN)
	@mkdir -p fuzz-corpus-tmp
	$(FUZZ_BIN) $(FUZZ_ARGS) fuzz-corpus-tmp tests/trace/corpus

# In `make check`: every seed of the checked-in corpus whole (the large
# logs included), then a fixed number of mutations of at most
# FUZZ_MAX_LEN bytes (scripts/fuzz-long.sh lets them grow to 1 MiB).
FUZZ_MAX_LEN ?= 16384
fuzz-short: $(FUZZ_BIN)
	@rm -rf $(FUZZ_DIR)/run && mkdir -p $(FUZZ_DIR)/run
	$(FUZZ_BIN) tests/trace/corpus/*
	$(FUZZ_BIN) -runs=$(FUZZ_RUNS) -max_len=$(FUZZ_MAX_LEN) -seed=1 \
		$(FUZZ_DIR)/run tests/trace/corpus
.PHONY: fuzz fuzz-short
CHECK_RUNS += fuzz-short

# ---- benchmark helper (bench/trace_bench.py runs it on the GPU machine) ----
$(BUILD)/bench/trace_churn: $(BUILD)/obj/bench/trace_churn.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LDLIBS)
ALL_TARGETS += $(BUILD)/bench/trace_churn
