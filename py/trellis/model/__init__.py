"""Model files: locating the weights Trellis ships with or is pointed at."""
