# The injection library (trace/inject/): libgpureclaim_trace.so, which the
# CUDA driver loads from CUDA_INJECTION64_PATH. It links nothing of ours
# but the log format; it exports InitializeInjection and the pause/resume
# pair of include/gpureclaim_trace.h only (libgpureclaim_trace.map).
TRACE_LIB := $(BUILD)/libgpureclaim_trace.so
TRACE_INJECT_SRCS := $(wildcard trace/inject/*.c) $(TRACE_FORMAT_SRCS)
TRACE_INJECT_OBJS := $(TRACE_INJECT_SRCS:%.c=$(BUILD)/obj/%.o)

$(TRACE_LIB): $(TRACE_INJECT_OBJS) trace/inject/libgpureclaim_trace.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,--version-script=trace/inject/libgpureclaim_trace.map \
		-Wl,-z,nodelete $(LDFLAGS) -o $@ $(TRACE_INJECT_OBJS) $(LDLIBS)

ALL_TARGETS += $(TRACE_LIB)
