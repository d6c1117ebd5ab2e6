# Benchmarks (run on the GPU machine; each skips cleanly without a driver).
# bench/ps_bench.sh times the built tool against nvidia-smi; the programs
# below are built with `make all`.
$(BUILD)/bench/ps_query_bench: $(BUILD)/obj/bench/ps_query_bench.o \
		$(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libgpureclaim.a $(LDLIBS)

ALL_TARGETS += $(BUILD)/bench/ps_query_bench

$(BUILD)/bench/nvml_cost: $(BUILD)/obj/bench/nvml_cost.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LDLIBS)

ALL_TARGETS += $(BUILD)/bench/nvml_cost

# A driver that does nothing, for the tracer's CPU figures
# (bench/trace_cpu.sh): $(BUILD)/bench/fakecuda/libcuda.so.1.
$(BUILD)/bench/fakecuda/libcuda.so.1: $(BUILD)/obj/bench/fakecuda.o
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libcuda.so.1 $(LDFLAGS) -o $@ $<

ALL_TARGETS += $(BUILD)/bench/fakecuda/libcuda.so.1

# Synthetic logs for the reader's benchmark (bench/trace_reader.sh).
$(BUILD)/bench/trace_gen: $(BUILD)/obj/bench/trace_gen.o \
		$(BUILD)/obj/trace/inject/log_write.o \
		$(BUILD)/obj/trace/format/trace_ops.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

ALL_TARGETS += $(BUILD)/bench/trace_gen

$(BUILD)/bench/nvml_exit: $(BUILD)/obj/bench/nvml_exit.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LDLIBS)

ALL_TARGETS += $(BUILD)/bench/nvml_exit
