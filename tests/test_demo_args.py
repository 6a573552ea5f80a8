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
