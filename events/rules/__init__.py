"""Condition rules: measure the fabric after a discovery (``topology``) or a counter sweep
(``counters``) and write events for conditions that start or stop holding; the alarm engine
(``events.engine``) turns those events into alarms."""
