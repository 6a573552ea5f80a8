"""``manage.py weft_agent [options]``: the host agent (``pools.agent``) from a Weft checkout."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from pools import agent


class Command(BaseCommand):
    help = "Collect nvidia-smi and the local HCAs and post them to Weft (see python -m pools.agent --help)."

    def add_arguments(self, parser):
        parser.add_argument("agent_args", nargs="*", help="options of python -m pools.agent (after --)")

    def handle(self, *args, **opts):
        code = agent.main(opts["agent_args"])
        if code:
            raise CommandError(f"agent exited {code}", returncode=code)
