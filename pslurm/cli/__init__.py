"""The user commands: one thin module per command, shared options and the client in common."""
