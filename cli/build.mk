# The command-line tool: $(BUILD)/gpureclaim. Every cli/*.c is linked in,
# the trace subcommands (cli/cmd_trace.c, cli/cmd_report.c) included, with
# the trace reader's objects (TRACE_READ_OBJS, trace/read/build.mk,
# included before this file) and the static core (the output toolkit in it).
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/gpureclaim: $(CLI_OBJS) $(TRACE_READ_OBJS) $(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(TRACE_READ_OBJS) \
		$(BUILD)/libgpureclaim.a -lm $(LDLIBS)

ALL_TARGETS += $(BUILD)/gpureclaim

# pytest runs the built tool against the simulated driver (and the trace
# reader's test program writes the sample log report's examples read).
test-cli: $(BUILD)/gpureclaim $(SIM_LIBS) $(TRACE_TEST_DIR)/test_trace_log
	GPURECLAIM_BIN=$(abspath $(BUILD)/gpureclaim) \
	GPR_SIM_DIR=$(abspath $(BUILD)/sim) \
	GPR_FAKES_BUILD=$(abspath $(BUILD)/tests) \
		$(PYTHON) -m pytest -q -p no:cacheprovider tests/cli
.PHONY: test-cli
CHECK_RUNS += test-cli
SAN_RUNS += test-cli
