"""Command-line plumbing, the only gin-aware code: flags, gin files and bindings, process
start-up, and one-line errors for the entry points."""
