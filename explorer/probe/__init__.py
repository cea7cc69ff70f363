"""Measure this machine's GPUs (or CPU) and use the measurements as calibration."""
