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
