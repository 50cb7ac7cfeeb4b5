"""Shared kernel: domain types, parsers and conversions. Imports nothing from the rest of pslurm
except the generated protobuf stubs."""
