"""Bringing clusters up and down on one machine: processes on loopback (local) or LXC containers."""
