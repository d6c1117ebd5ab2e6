# C unit tests (cmocka): each tests/unit/test_*.c is one program, linked
# against the static core library and tests/unit/support.c. They find the
# simulated driver through GPR_SIM_DIR.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_SUPPORT := $(BUILD)/obj/tests/unit/support.o

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(UNIT_SUPPORT) $(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(UNIT_SUPPORT) $(BUILD)/libgpureclaim.a -lcmocka $(LDLIBS)

ALL_TARGETS += $(UNIT_BINS)

# Each program runs alone; a failing one fails the run after all have run.
test-unit: $(UNIT_BINS) $(SIM_LIBS)
	@fail=0; for t in $(UNIT_BINS); do \
		echo "== $$t"; \
		GPR_SIM_DIR=$(abspath $(BUILD)/sim) $(TEST_WRAP) $$t || fail=1; \
	done; exit $$fail
.PHONY: test-unit
CHECK_RUNS += test-unit
SAN_RUNS += test-unit
TSAN_RUNS += test-unit

# A stand-in for torch's libtorch_cuda.so in its 2.11 and 2.13 layouts
# (tests/fixtures/libtorch_cuda.cpp), which the fake torch loads: C++,
# since the point is the real libstdc++ std::map and std::shared_mutex.
CXX ?= c++
FAKE_TORCH_LIBS := $(BUILD)/tests/fake_torch/2.11/libtorch_cuda.so \
	$(BUILD)/tests/fake_torch/2.13/libtorch_cuda.so
$(BUILD)/tests/fake_torch/2.11/libtorch_cuda.so: tests/fixtures/libtorch_cuda.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -g -fPIC -shared -Wall -Wextra -Werror \
		-fvisibility=hidden -Wl,-soname,libtorch_cuda.so \
		-o $@ $<
$(BUILD)/tests/fake_torch/2.13/libtorch_cuda.so: tests/fixtures/libtorch_cuda.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -g -fPIC -shared -Wall -Wextra -Werror \
		-fvisibility=hidden -DFAKE_TORCH_213 \
		-Wl,-soname,libtorch_cuda.so -o $@ $<
ALL_TARGETS += $(FAKE_TORCH_LIBS)

# A stand-in for the tracer's live query (tests/fixtures/fake_tracer.c).
FAKE_TRACER := $(BUILD)/tests/libfake_tracer.so
$(FAKE_TRACER): tests/fixtures/fake_tracer.c python/src/trace_live.h
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden \
		-Ipython/src -o $@ $<
ALL_TARGETS += $(FAKE_TRACER)

# How `gpureclaim` ends, made visible (tests/cli/test_ps_exit.py): a
# detached process held in its _exit, and clone/fork that fail.
EXIT_FIXTURES := $(BUILD)/tests/libexit_hold.so $(BUILD)/tests/libno_fork.so
$(BUILD)/tests/libexit_hold.so: tests/fixtures/exit_hold.c
$(BUILD)/tests/libno_fork.so: tests/fixtures/no_fork.c
$(EXIT_FIXTURES):
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O1 -g -fPIC -shared -fvisibility=hidden \
		-o $@ $<
ALL_TARGETS += $(EXIT_FIXTURES)
test-cli: $(EXIT_FIXTURES)
