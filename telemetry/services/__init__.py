"""Telemetry services: the counter sweep (``sweep``) and the history store (``history``)."""
