"""Command-line helpers for people running the project (synth summary, uploads, estimate, runs, reports)."""
