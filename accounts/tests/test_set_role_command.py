"""``manage.py set_role`` refuses a user name the model refuses (it created a blank one)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command


@pytest.mark.parametrize("name", ["", "   ", "a b", "x" * 151, "<script>"])
def test_set_role_create_refuses_invalid_user_names(db, name):
    with pytest.raises(CommandError, match="user name"):
        call_command("set_role", name, "admin", "--create")
    assert not get_user_model().objects.exists()


def test_set_role_create_still_creates_valid_users(db):
    call_command("set_role", "ops.team-1@x", "operator", "--create")
    assert get_user_model().objects.filter(username="ops.team-1@x").exists()
