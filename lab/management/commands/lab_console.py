"""``manage.py lab_console SOCKET unlink|relink NODE [PORT]``, ``... SOCKET retrain NODE PORT`` or
``... SOCKET raw COMMAND``: pull or put back a cable of a running lab (``relink`` of a port disabled
with ``ibportstate`` trains its link again, as ``retrain``) (the demo's or ``fabric_lab``'s) from another shell, through
the lab's console socket (``lab.console_server``; the demo and ``fabric_lab`` print its path).
Prints the answer; exit status 1 with the reason when the lab refused it or is not there.

``manage.py lab_console`` itself does not start Django: ``manage.py`` hands it to
``lab.console_client.main`` (one line over a socket needs no app); this command is the same
request for ``call_command``."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Pull (unlink) or put back (relink) a cable of a running lab, or run an ibsim console command "
        "(raw), through the console socket the demo and fabric_lab print. Example: "
        "manage.py lab_console /tmp/weft-demo-lab-XXXX/console.sock unlink rail0-leaf-01 5"
    )

    def add_arguments(self, parser):
        parser.add_argument("socket", help="the lab's console socket (printed by the demo / fabric_lab)")
        parser.add_argument("verb", choices=["unlink", "relink", "retrain", "raw"])
        parser.add_argument(
            "words", nargs="+", metavar="ARG", help="NODE [PORT] (node id, description or GUID), or COMMAND"
        )

    def handle(self, *args, **opts):
        from lab.console_client import request, request_line

        line = request_line(opts["verb"], opts["words"])
        try:
            answer = request(opts["socket"], line)
        except OSError as exc:
            raise CommandError(f"no lab answers on {opts['socket']}: {exc}") from None
        if answer.startswith("error:"):
            raise CommandError(answer[len("error:") :].strip())
        self.stdout.write(answer)
