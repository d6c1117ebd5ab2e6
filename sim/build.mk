# The simulated driver (docs/sim.md): two shared libraries with the real
# sonames, so LD_LIBRARY_PATH=$(BUILD)/sim stands them in for the driver.
# config.c, state.c and lock.c are compiled once and linked into both; their
# symbols stay hidden, so each library has its own copy.
SIM_COMMON_OBJS := $(BUILD)/obj/sim/config.o $(BUILD)/obj/sim/state.o \
	$(BUILD)/obj/sim/lock.o
SIM_CUDA_OBJS := $(BUILD)/obj/sim/cuda.o $(BUILD)/obj/sim/mempool.o \
	$(BUILD)/obj/sim/cuda_mem.o $(BUILD)/obj/sim/cuda_proc.o \
	$(SIM_COMMON_OBJS)
SIM_NVML_OBJS := $(BUILD)/obj/sim/nvml.o $(SIM_COMMON_OBJS)

SIM_LIBS := $(BUILD)/sim/libcuda.so.1 $(BUILD)/sim/libnvidia-ml.so.1

$(BUILD)/sim/libcuda.so.1: $(SIM_CUDA_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libcuda.so.1 $(LDFLAGS) -o $@ \
		$(SIM_CUDA_OBJS) -lpthread

$(BUILD)/sim/libnvidia-ml.so.1: $(SIM_NVML_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnvidia-ml.so.1 $(LDFLAGS) -o $@ \
		$(SIM_NVML_OBJS) -lpthread

sim: $(SIM_LIBS)
.PHONY: sim

ALL_TARGETS += $(SIM_LIBS)

# ---- fuzzing the GPURECLAIM_SIM parser (libFuzzer; clang only) ----
FUZZ_SIM_BIN := build/fuzz/fuzz_sim_config
FUZZ_SIM_SRCS := tests/unit/fuzz_sim_config.c sim/config.c
FUZZ_SIM_RUNS ?= 50000

$(FUZZ_SIM_BIN): $(FUZZ_SIM_SRCS) sim/sim.h
	@mkdir -p $(dir $@)
	clang $(CSTD) $(WARN) -O1 -g -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -o $@ $(FUZZ_SIM_SRCS) -lpthread

# `make fuzz-sim`: open-ended (FUZZ_ARGS="-max_total_time=600" to bound it).
fuzz-sim: $(FUZZ_SIM_BIN)
	@mkdir -p fuzz-sim-corpus-tmp
	$(FUZZ_SIM_BIN) $(FUZZ_ARGS) fuzz-sim-corpus-tmp tests/unit/corpus_sim

# In `make check`: a fixed number of runs over the checked-in corpus.
fuzz-sim-short: $(FUZZ_SIM_BIN)
	@rm -rf build/fuzz/sim-run && mkdir -p build/fuzz/sim-run
	$(FUZZ_SIM_BIN) -runs=$(FUZZ_SIM_RUNS) -seed=1 build/fuzz/sim-run \
		tests/unit/corpus_sim
.PHONY: fuzz-sim fuzz-sim-short
CHECK_RUNS += fuzz-sim-short
