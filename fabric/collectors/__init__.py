"""Collectors: run infiniband-diags tools with timeouts and hand their text to the parsers."""
