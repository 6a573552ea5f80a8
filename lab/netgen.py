"""Netfile generators (filled in below)."""
