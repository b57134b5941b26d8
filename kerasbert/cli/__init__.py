"""absl-flag entry points. Each parses flags, calls the library and prints; nothing else."""
