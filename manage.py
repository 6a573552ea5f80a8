#!/usr/bin/env python
"""Django's command-line utility for Weft."""

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["lab_console"]:
        # one line to a lab's console socket from another shell: no Django start-up (it took
        # seconds on the demo's busy machine); lab.console_client is the same command
        from lab.console_client import main as lab_console

        sys.exit(lab_console(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
