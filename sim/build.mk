# (filled by the sim part)
