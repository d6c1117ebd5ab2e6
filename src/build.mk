# The core library: libgpureclaim.so (exports gpr_* only) and libgpureclaim.a,
# with the output toolkit (OUT_SRCS, src/out/build.mk) inside.
CORE_SRCS := $(wildcard src/*.c src/driver/*.c) $(OUT_SRCS)
CORE_OBJS := $(CORE_SRCS:%.c=$(BUILD)/obj/%.o)

$(CORE_OBJS): CFLAGS += -DGPR_BUILDING_LIBRARY

$(BUILD)/libgpureclaim.a: $(CORE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libgpureclaim.so: $(CORE_OBJS) src/libgpureclaim.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libgpureclaim.so.0 \
		-Wl,--version-script=src/libgpureclaim.map $(LDFLAGS) \
		-o $@ $(CORE_OBJS) $(LDLIBS)

ALL_TARGETS += $(BUILD)/libgpureclaim.a $(BUILD)/libgpureclaim.so

# Exported symbols are exactly the gpr_* functions of the public header.
check-exports: $(BUILD)/libgpureclaim.so
	@bash scripts/check-exports.sh $(BUILD)/libgpureclaim.so include/gpureclaim.h src/libgpureclaim.map
CHECK_RUNS += check-exports
.PHONY: check-exports
