# The trace log format (trace/format/): the on-disk layout and the
# operations table, compiled into both trace products (the injection
# library and the reader).
TRACE_FORMAT_SRCS := trace/format/trace_ops.c
