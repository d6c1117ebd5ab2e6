# (filled by the cli part)
