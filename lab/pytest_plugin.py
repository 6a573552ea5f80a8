"""pytest fixtures of the fabric lab (filled in by the lab library)."""
