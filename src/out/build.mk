# The output toolkit (src/out/): the buffer, the JSON writer, the
# terminal-safe text rule and the byte formatter of every product. Part of
# the core library (its lowest layer, linked into libgpureclaim.a/.so and
# the Python extension); the trace reader's tests and fuzz target take the
# sources from OUT_SRCS.
OUT_SRCS := $(wildcard src/out/*.c)
OUT_OBJS := $(OUT_SRCS:%.c=$(BUILD)/obj/%.o)
