"""Pools services: records → database, each in one audited transaction (see ``inventory``)."""
