"""Command-line helpers for people running the project (summaries, uploads, local runs)."""
