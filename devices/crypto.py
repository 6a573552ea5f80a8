"""Device credentials at rest: encrypted with Fernet (AES-128-CBC + HMAC-SHA256, ``cryptography``).

Keys come from the environment (``settings.WEFT_CREDENTIALS_KEYS``, read from
``WEFT_CREDENTIALS_KEY``: one or more Fernet keys, comma-separated; the first encrypts, all
decrypt, so a key is rotated by putting the new one first). Without it, a key is derived from
``SECRET_KEY`` (HKDF-SHA256), which production refuses to leave at the development value: a
site that may change ``SECRET_KEY`` should set ``WEFT_CREDENTIALS_KEY``.

Plain text exists only in memory, for the SNMP request; it is never logged, serialised or audited.
"""

from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class CredentialError(Exception):
    """A stored credential that cannot be decrypted with the configured keys (the key changed)."""


def derive_key(secret: str) -> bytes:
    """A Fernet key derived from ``secret`` (HKDF-SHA256, fixed salt and purpose)."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"weft-credentials", info=b"devices").derive(
        secret.encode()
    )
    return base64.urlsafe_b64encode(raw)


@functools.lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    material = [k.encode() for k in keys] or [derive_key(secret_key)]
    return MultiFernet([Fernet(k) for k in material])


def _current() -> MultiFernet:
    return _fernet(tuple(settings.WEFT_CREDENTIALS_KEYS), settings.SECRET_KEY)


def encrypt(plain: str) -> str:
    """The token (ASCII) of ``plain``; "" for "" (no credential stored)."""
    if not plain:
        return ""
    return _current().encrypt(plain.encode()).decode()


def decrypt(token: str) -> str:
    """The plain text of a token from :func:`encrypt`; "" for "".

    Raises:
        CredentialError: the token was made with another key (``WEFT_CREDENTIALS_KEY`` or
            ``SECRET_KEY`` changed) or is damaged.
    """
    if not token:
        return ""
    try:
        return _current().decrypt(token.encode()).decode()
    except (InvalidToken, ValueError) as exc:
        raise CredentialError(
            "a stored SNMP credential cannot be decrypted with the configured key "
            "(WEFT_CREDENTIALS_KEY or SECRET_KEY changed?): enter it again"
        ) from exc


def valid_key(key: str) -> bool:
    """Whether ``key`` is a Fernet key (URL-safe base64 of 32 bytes)."""
    try:
        Fernet(key.encode())
    except (ValueError, TypeError):
        return False
    return True
