"""Fault injection: kills, corrupt inputs, full and read-only disks, mismatched weights."""
