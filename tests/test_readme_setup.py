"""The README's "Two commands" names every Debian package ``bin/setup`` installs: a new user on a
fresh machine reads there what the two commands will put on it (the walkthrough found nine of
them missing: the test receivers, slapd, the python-ldap build)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_names_every_package_bin_setup_installs():
    setup = (ROOT / "bin" / "setup").read_text()
    packages = re.search(r"^APT_PACKAGES=\((.*?)\)$", setup, re.M).group(1).split()
    assert len(packages) > 10
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Two commands") : readme.index("### The demo")]
    section = re.sub(r"```.*?```", "", section, flags=re.S)  # the commands' block
    named = set(re.findall(r"[a-z0-9][a-z0-9.+-]*", " ".join(re.findall(r"`([^`]+)`", section))))
    assert [p for p in packages if p not in named] == []
