"""Fixtures of the UFM-compatible API tests: a stored fat tree (3 leaves, 2 spines, hosts
``host001``..``host006``, one HCA each, two per leaf), the fabric the API serves, and HTTP clients
that authenticate as UFM's clients do (Basic with a user's password, or ``Basic <token>``)."""

import base64

import pytest


def basic(username: str, password: str) -> str:
    """The ``Authorization`` value of HTTP Basic."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.fixture
def fat_tree(db):
    """A stored 2-level fat tree: leaf-01 with host001/host002, leaf-02 with host003/host004,
    leaf-03 with host005/host006, spine-01/spine-02 over all leaves (``lab.netgen``)."""
    from fabric.services.ingest import import_topology_text
    from lab import netgen

    return import_topology_text("ft", netgen.fat_tree_2level(3, 2, 2), filename="ft.topo").fabric


@pytest.fixture
def ufm(users):
    """``ufm(role_or_user, password=None) -> Client`` sending HTTP Basic with that user's password
    (the ``users`` fixture's ``pw-<name>``); ``ufm(None)`` sends nothing."""
    from django.test import Client

    def make(who, password: str | None = None) -> Client:
        if who is None:
            return Client()
        user = users[who] if isinstance(who, str) else who
        return Client(HTTP_AUTHORIZATION=basic(user.username, password or f"pw-{user.username}"))

    return make
