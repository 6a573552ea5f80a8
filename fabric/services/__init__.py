"""Fabric services: records → database, each in one transaction (see ``ingest``, ``discovery``)."""
