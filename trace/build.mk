# (filled by the trace part)
