"""Run tasks: what the generic runner needs of each benchmark."""
