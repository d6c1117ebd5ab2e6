# The trace reader (trace/read/): the log reader, its statistics, the text
# and JSON reports and the Chrome/SVG exports. Linked into the CLI and the
# trace tests as objects; it needs the output toolkit (src/out/, inside
# libgpureclaim.a, or OUT_SRCS where sources are compiled directly).
TRACE_READ_SRCS := $(wildcard trace/read/*.c) $(TRACE_FORMAT_SRCS)
TRACE_READ_OBJS := $(TRACE_READ_SRCS:%.c=$(BUILD)/obj/%.o)
