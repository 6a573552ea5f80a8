"""A console mail backend that prints one line per mail, for the demo (``manage.py demo``)."""

from __future__ import annotations

from django.core.mail.backends.console import EmailBackend


class OneLineConsoleBackend(EmailBackend):
    """Django's console backend, each message as ``mail to RCPT[, RCPT]: SUBJECT`` on one line
    (Django's prints the whole MIME message). Thread-safe and stream-selectable as Django's."""

    def write_message(self, message) -> None:
        subject = " ".join(str(message.subject).split())
        self.stream.write(f"mail to {', '.join(message.recipients())}: {subject}\n")
