"""What ``manage.py cable_info`` and ``manage.py switch_health`` share: a command that reads a
fabric's hardware now with the fabric's tool, or imports saved outputs of that tool (``--file``,
repeatable), prints a JSON summary as the last line of stdout and exits 1 with a located reason
on bad input (each file is its own transaction in the service: nothing stored for a refused one,
the others kept). Not a command itself (it lives outside ``commands/``)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from fabric.upload import UploadError, read_output


class ReadingCommand(BaseCommand):
    """Base of a ``FABRIC [--file FILE ...]`` command. A subclass names ``error`` (the service's
    exception for a refused file, whose message names the file) and implements
    :meth:`import_file`, and may add options (:meth:`add_file_arguments`), say why a collection
    stored nothing (:meth:`collect_refusal`) and list a file's warnings (:meth:`file_warnings`)."""

    error: type[Exception] = Exception

    def add_arguments(self, parser):
        parser.add_argument("fabric", help="fabric name")
        self.add_file_arguments(parser)

    def add_file_arguments(self, parser) -> None:
        """``--file`` and the options that go with it (default: ``--file`` alone)."""
        parser.add_argument("--file", action="append", default=[], help="a saved output (repeatable)")

    def collect(self, fabric: Fabric) -> dict:
        """Read ``fabric`` now with its tool: the service's summary (``{"skipped": why}`` when it
        has no tool)."""
        raise NotImplementedError

    def collect_refusal(self, out: dict) -> str | None:
        """Why :meth:`collect`'s summary ``out`` is a failure of the command (exit status 1), or None."""
        return f"not collected: {out['skipped']}" if "skipped" in out else None

    def import_file(self, fabric: Fabric, name: str, text: str, opts: dict) -> dict:
        """Import one saved output (``name`` its path, ``text`` its content): the summary entry
        of the file. Raises :attr:`error` for a refused file."""
        raise NotImplementedError

    def file_warnings(self, done: dict) -> list[str]:
        """What an imported file's entry says was skipped in it (written to stderr)."""
        return []

    def handle(self, *args, **opts):
        fabric = Fabric.objects.filter(name=opts["fabric"]).first()
        if fabric is None:
            raise CommandError(f"no fabric named {opts['fabric']!r}")
        if not opts["file"]:
            out = self.collect(fabric)
            self.stdout.write(json.dumps(out))
            why = self.collect_refusal(out)
            if why:
                raise CommandError(why)
            return
        imported, failed = [], []
        for name in opts["file"]:
            try:
                text = read_output(name)  # at most WEFT_IMPORT_MAX_BYTES
                imported.append(self.import_file(fabric, name, text, opts))
            except OSError as exc:
                failed.append(f"{name}: {exc.strerror or exc}")
            except (UploadError, self.error) as exc:
                failed.append(str(exc))
        for why in failed:
            self.stderr.write(why)
        for done in imported:
            for why in self.file_warnings(done):
                self.stderr.write(f"{done['file']}: {why}")
        self.stdout.write(json.dumps({"imported": imported, "failed": len(failed)}))
        if failed:
            raise CommandError(f"{len(failed)} of {len(opts['file'])} files not imported")
