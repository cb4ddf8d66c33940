"""Command-line plumbing: the only gin-aware code (flags, gin files, start-up)."""
