# The trace log format (trace/format/): the on-disk layout, the operations
# table and the tracer's on/off switches, compiled into both trace products
# (the injection library and the reader, which the CLI links).
TRACE_FORMAT_SRCS := trace/format/trace_ops.c trace/format/trace_switch.c
