"""Small typed readers of the process environment, used by ``weft.settings``.

Each reader returns the default when the variable is unset or empty and raises
``ImproperlyConfigured`` with the variable's name when the value cannot be read,
so a typo in a deployment fails at start-up, not at the first request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_str(name: str, default: str = "") -> str:
    """Return ``$name`` stripped, or ``default`` when unset/empty."""
    value = os.environ.get(name, "").strip()
    return value or default


def env_bool(name: str, default: bool = False) -> bool:
    """Return ``$name`` as a bool (1/true/yes/on, 0/false/no/off).

    Raises:
        ImproperlyConfigured: the value is none of those words.
    """
    value = env_str(name).lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    """Return ``$name`` as an int.

    Raises:
        ImproperlyConfigured: the value is not an integer.
    """
    value = env_str(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from exc


def env_float(name: str, default: float) -> float:
    """Return ``$name`` as a float.

    Raises:
        ImproperlyConfigured: the value is not a number.
    """
    value = env_str(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from exc


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """Return ``$name`` split on commas, items stripped, empty items dropped."""
    value = env_str(name)
    if not value:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


@dataclass(frozen=True)
class EmailSettings:
    """SMTP settings read from an ``EMAIL_URL``."""

    backend: str
    host: str = "localhost"
    port: int = 25
    user: str = ""
    password: str = ""
    use_tls: bool = False
    use_ssl: bool = False
    file_path: str = ""


def parse_email_url(url: str) -> EmailSettings:
    """Parse an ``EMAIL_URL``.

    Forms: ``smtp://[user:pass@]host[:port][?tls=1]``, ``smtps://...`` (implicit TLS,
    default port 465), ``smtp+tls://...`` (STARTTLS, default port 587),
    ``console://`` (print mails), ``file:///path`` (one file per mail),
    ``memory://`` (tests).

    Raises:
        ImproperlyConfigured: unknown scheme or a port that is not a number.
    """
    parts = urlparse(url)
    scheme = parts.scheme.lower()
    if scheme == "console":
        return EmailSettings(backend="django.core.mail.backends.console.EmailBackend")
    if scheme == "memory":
        return EmailSettings(backend="django.core.mail.backends.locmem.EmailBackend")
    if scheme == "file":
        return EmailSettings(backend="django.core.mail.backends.filebased.EmailBackend", file_path=parts.path)
    if scheme not in {"smtp", "smtps", "smtp+tls"}:
        raise ImproperlyConfigured(
            f"EMAIL_URL scheme {scheme!r} is not one of smtp, smtps, smtp+tls, console, file, memory"
        )
    query = parse_qs(parts.query)
    use_ssl = scheme == "smtps"
    use_tls = scheme == "smtp+tls" or query.get("tls", ["0"])[0].lower() in _TRUE
    try:
        port = parts.port or (465 if use_ssl else 587 if use_tls else 25)
    except ValueError as exc:
        raise ImproperlyConfigured(f"EMAIL_URL has a bad port: {url!r}") from exc
    return EmailSettings(
        backend="django.core.mail.backends.smtp.EmailBackend",
        host=parts.hostname or "localhost",
        port=port,
        user=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        use_tls=use_tls,
        use_ssl=use_ssl,
    )
