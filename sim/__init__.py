"""The cluster emulator: hybrid-parallel jobs with injected faults and ground truth."""
