"""Run the synthesized pipeline definition on this machine (no Docker, no AWS)."""
