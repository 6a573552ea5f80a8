"""``manage.py demo`` with a bad --topology or --fat-tree: a CommandError before anything is
migrated, created or started (it was a traceback after the admin user had been created)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    "args, message",
    [(["--topology", "/nonexistent/net"], "no such file"), (["--fat-tree", "zz"], "fat-tree spec")],
)
def test_demo_bad_lab_options_are_command_errors(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("demo", *args)
    assert not get_user_model().objects.exists()


def test_demo_prints_one_line_per_mail(settings):
    """The demo's console mail: one line per mail (recipients and subject), not the MIME message."""
    import io

    from django.core.mail import EmailMultiAlternatives, get_connection

    from weft.management.commands.demo import brief_console_mail

    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    brief_console_mail()
    stream = io.StringIO()
    mail = EmailMultiAlternatives(
        "[Weft CRITICAL] Link down:\n leaf01 [3]", "body\nmore", "weft@localhost", ["a@x.org", "b@x.org"],
        connection=get_connection(stream=stream),
    )  # fmt: skip
    mail.attach_alternative("<p>body</p>", "text/html")
    mail.send()
    assert stream.getvalue() == "mail to a@x.org, b@x.org: [Weft CRITICAL] Link down: leaf01 [3]\n"
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    brief_console_mail()  # other backends are left alone
    assert settings.EMAIL_BACKEND == "django.core.mail.backends.smtp.EmailBackend"


def test_demo_admin_line_has_single_spaces(db, capsys):
    from weft.management.commands.demo import Command

    cmd = Command()
    again = cmd._admin()
    line = capsys.readouterr().out.strip()
    assert line.startswith("Created the Weft admin user. Sign in as admin / ") and "  " not in line
    # the line repeated under the address: the same password, without "Created" a second time
    assert again.startswith("Sign in as admin / ") and line.endswith(again)


def test_import_topology_in_embedded_mode_prints_only_its_summary(tmp_path):
    """An embedded one-shot command runs its follow-up tasks in-process: no Celery task-success
    lines on stderr, stdout exactly the JSON summary."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.support.migrated import seed_sqlite
    from tests.support.topologies import BASE

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "base.topo").write_text(BASE)
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "WEFT_CELERY_EAGER"}}
    env["WEFT_DATA_DIR"] = str(tmp_path)
    manage = [sys.executable, "manage.py"]
    seed_sqlite(tmp_path / "weft.sqlite3")  # migrated (tests.support.migrated)
    proc = subprocess.run(
        [*manage, "import_topology", str(tmp_path / "base.topo"), "--fabric", "f"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fabric"] == "f" and len(proc.stdout.splitlines()) == 1
    assert "celery.app.trace" not in proc.stderr and "succeeded in" not in proc.stderr


def test_demo_log_is_quiet_unless_verbose(settings):
    """Quiet by default: the libraries' INFO lines (Celery, axes) are dropped, Weft's own kept,
    also after Celery's Django fix-up has re-applied ``settings.LOGGING`` (it runs
    ``django.setup()`` again when the in-process worker imports the task modules)."""
    import logging
    import logging.config

    from django.utils.log import configure_logging

    from weft.management.commands.demo import quiet_logging

    original = settings.LOGGING
    root = logging.getLogger()
    saved = root.level, {name: logging.getLogger(name).level for name in ("fabric", "weft", "lab")}
    try:
        quiet_logging()
        for again in (False, True):
            if again:  # what django.setup() does, as Celery's fix-up calls it
                configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
            assert not logging.getLogger("celery.beat").isEnabledFor(logging.INFO), again
            assert not logging.getLogger("axes.handlers.database").isEnabledFor(logging.INFO), again
            assert logging.getLogger("celery.beat").isEnabledFor(logging.WARNING)
            assert logging.getLogger("fabric.services.notices").isEnabledFor(logging.INFO)
            assert logging.getLogger("weft.lab").isEnabledFor(logging.INFO)
            assert not logging.getLogger("fabric.services.notices").isEnabledFor(logging.DEBUG)
    finally:
        logging.config.dictConfig(original)
        root.setLevel(saved[0])
        for name, level in saved[1].items():
            logging.getLogger(name).setLevel(level)


def test_in_process_beat_runs_entries_at_start_except_skip_first(monkeypatch):
    """The demo discovers the lab itself and marks the beat's discovery ``skip_first``: one
    discovery at start, not two; other entries still run at once."""
    import threading
    from datetime import timedelta

    from tests.support.waits import wait_for
    from weft import inprocess

    class CountingStop(threading.Event):
        """The beat's stop flag, counting the beat's passes (one wait per pass)."""

        passes = 0

        def wait(self, timeout=None):
            self.passes += 1
            return super().wait(timeout)

    stop = CountingStop()
    monkeypatch.setattr(inprocess, "_stop", stop)
    submitted: list[str] = []
    monkeypatch.setattr(inprocess, "submit", lambda task, args, kwargs, **kw: submitted.append(task.name))
    schedule = {
        "discover-all-fabrics": {"task": "fabric.tasks.discover_all_task", "schedule": timedelta(hours=1),
                                 "skip_first": True},
        "poll-all-fabrics": {"task": "telemetry.tasks.poll_all_task", "schedule": timedelta(hours=1)},
    }  # fmt: skip
    from weft.celery import app

    app.loader.import_default_modules()
    thread = threading.Thread(target=inprocess._beat, args=(schedule,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: stop.passes >= 3, 10, "three passes of the beat")
    finally:
        stop.set()
        thread.join(timeout=5)
    assert submitted == ["telemetry.tasks.poll_all_task"]


def test_demo_default_fabric_is_the_rail_optimised_pod():
    """The demo's default ``--fat-tree`` is ``lab.netgen.DEMO_SPEC`` (the README describes it);
    the earlier fat tree stays one option away."""
    from pathlib import Path

    from lab import netgen
    from weft.management.commands.demo import Command

    parser = Command().create_parser("manage.py", "demo")
    assert parser.parse_args([]).fat_tree == netgen.DEMO_SPEC
    assert parser.parse_args(["--fat-tree", netgen.FAT_TREE_SPEC]).fat_tree == netgen.FAT_TREE_SPEC
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert netgen.DEMO_SPEC in readme and netgen.FAT_TREE_SPEC in readme
