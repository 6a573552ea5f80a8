"""Small typed readers of the process environment, used by ``weft.settings``.

Each reader returns the default when the variable is unset or empty and raises
``ImproperlyConfigured`` with the variable's name when the value cannot be read,
so a typo in a deployment fails at start-up, not at the first request.
"""

from __future__ import annotations

import math
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


def _check_min(name: str, raw: str, value, min_value, positive: bool):
    if positive and not value > 0:
        raise ImproperlyConfigured(f"{name}={raw!r} must be greater than 0")
    if min_value is not None and value < min_value:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {min_value}")
    return value


def env_int(name: str, default: int, *, min_value: int | None = None) -> int:
    """Return ``$name`` as an int (``default`` when unset; the default is not checked).

    Raises:
        ImproperlyConfigured: the value is not an integer, or is below ``min_value``.
    """
    value = env_str(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from exc
    return _check_min(name, value, number, min_value, False)


def env_float(name: str, default: float, *, min_value: float | None = None, positive: bool = False) -> float:
    """Return ``$name`` as a float (``default`` when unset; the default is not checked).

    ``positive``: the value must be > 0 (timeouts, intervals); ``min_value``: at least this.

    Raises:
        ImproperlyConfigured: the value is not a finite number, or is out of that range.
    """
    value = env_str(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from exc
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name}={value!r} is not a finite number")
    return _check_min(name, value, number, min_value, positive)


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """Return ``$name`` (lower-cased) when it is one of ``choices``.

    Raises:
        ImproperlyConfigured: any other value (the message lists the choices).
    """
    value = env_str(name).lower()
    if not value:
        return default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    """Return ``$name`` split on commas, items stripped, empty items dropped."""
    value = env_str(name)
    if not value:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


def env_int_map(
    name: str, default: dict[str, int] | None = None, *, keys: tuple[str, ...] = (), min_value: int = 0
) -> dict[str, int]:
    """Return ``$name`` read as ``key=value,key=value`` (spaces around items ignored) as a dict.

    An unset/empty variable gives a copy of ``default`` (``{}`` when None). ``keys``, when given,
    are the names allowed on the left; every value is an integer of at least ``min_value``.

    Raises:
        ImproperlyConfigured: an item without ``=``, an unknown or repeated key, or a value that is
            not an integer >= ``min_value``; the message names the variable and the item.
    """
    value = env_str(name)
    if not value:
        return dict(default or {})
    out: dict[str, int] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        key, sep, number = (x.strip() for x in item.partition("="))
        if not sep or not key:
            raise ImproperlyConfigured(f"{name}: {item!r} is not key=value (e.g. symbol_errors=10)")
        if keys and key not in keys:
            raise ImproperlyConfigured(f"{name}: {key!r} is not one of {', '.join(keys)}")
        if key in out:
            raise ImproperlyConfigured(f"{name}: {key!r} is given twice")
        try:
            out[key] = int(number)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r}: {number!r} is not an integer") from exc
        if out[key] < min_value:
            raise ImproperlyConfigured(f"{name}: {item!r}: the value must be at least {min_value}")
    return out


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


def env_fernet_keys(name: str) -> list[str]:
    """Return ``$name`` as a list of Fernet keys (comma-separated URL-safe base64 of 32 bytes).

    Raises:
        ImproperlyConfigured: an entry is not a Fernet key (the message says how to make one,
            never the value).
    """
    from cryptography.fernet import Fernet

    keys = env_list(name, [])
    for i, key in enumerate(keys, 1):
        try:
            Fernet(key.encode())
        except (ValueError, TypeError) as exc:
            raise ImproperlyConfigured(
                f"{name}: key {i} is not a Fernet key (URL-safe base64 of 32 bytes; make one with "
                'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())")'
            ) from exc
    return keys


def env_pairs(name: str, *, keys: tuple[str, ...] = (), key_pattern: str = "") -> tuple[tuple[str, str], ...]:
    """Return ``$name`` read as ``key=value; key=value`` (``;`` or newlines between items, the
    first ``=`` of an item splits it) as ``((key, value), ...)`` in order; a key may repeat.

    Made for values that hold commas and ``=`` themselves, such as LDAP DNs
    (``admin=cn=weft-admins,ou=groups,dc=example,dc=org``). ``keys``, when given, are the keys
    allowed (compared lower-cased; returned lower-cased); ``key_pattern``, a regular expression a
    key must match in full. An unset/empty variable gives ``()``.

    Raises:
        ImproperlyConfigured: an item without ``=``, an empty key or value, a key outside
            ``keys`` or not matching ``key_pattern``, or the same pair twice; the message names
            the variable and the item.
    """
    import re

    value = env_str(name)
    out: list[tuple[str, str]] = []
    for item in (part.strip() for part in value.replace("\n", ";").split(";")):
        if not item:
            continue
        key, sep, rest = (x.strip() for x in item.partition("="))
        if not sep or not key or not rest:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not key=value (e.g. admin=cn=weft-admins,dc=example)"
            )
        if keys:
            key = key.lower()
            if key not in keys:
                raise ImproperlyConfigured(f"{name}: {key!r} is not one of {', '.join(keys)}")
        if key_pattern and not re.fullmatch(key_pattern, key):
            raise ImproperlyConfigured(f"{name}: {key!r} is not a valid key here")
        if (key, rest) in out:
            raise ImproperlyConfigured(f"{name}: {item!r} is given twice")
        out.append((key, rest))
    return tuple(out)
