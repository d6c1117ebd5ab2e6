# The simulated driver (docs/sim.md): two shared libraries with the real
# sonames, so LD_LIBRARY_PATH=$(BUILD)/sim stands them in for the driver.
# config.c, state.c and lock.c are compiled once and linked into both; their
# symbols stay hidden, so each library has its own copy.
SIM_COMMON_OBJS := $(BUILD)/obj/sim/config.o $(BUILD)/obj/sim/state.o \
	$(BUILD)/obj/sim/lock.o
SIM_CUDA_OBJS := $(BUILD)/obj/sim/cuda.o $(BUILD)/obj/sim/mempool.o \
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
