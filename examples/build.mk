# Examples: release_demo (what `make demo` runs on the simulated driver) and
# minimal (the README's C example), linked against the static core library.
EXAMPLE_BINS := $(BUILD)/examples/release_demo $(BUILD)/examples/minimal

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(BUILD)/libgpureclaim.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libgpureclaim.a $(LDLIBS)

ALL_TARGETS += $(EXAMPLE_BINS)

# Both examples on the simulated driver; the demo's figure is exact (its
# cached blocks, in the driver's 2 MiB granules).
test-examples: $(EXAMPLE_BINS) $(SIM_LIBS)
	@GPURECLAIM_SIM="gpus=2;state=examples-$$$$" \
	LD_LIBRARY_PATH=$(BUILD)/sim $(BUILD)/examples/release_demo | \
	grep -q 'released 1.5 GiB (1616904192 bytes) from the driver'
	@$(BUILD)/examples/minimal | grep -q 'released 0 B (0 bytes)'
	@echo "examples: release_demo and minimal gave the expected reports"
.PHONY: test-examples
CHECK_RUNS += test-examples
SAN_RUNS += test-examples

# tests/trace/test_cli.sh traces release_demo on the sim
test-trace: $(EXAMPLE_BINS)
