"""The Docker engine (SDK), BuildKit builds (CLI) and their progress display."""
