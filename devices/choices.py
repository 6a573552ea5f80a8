"""Enumerations of the devices app (SNMP versions and USM protocols, interface and sensor states)."""

from django.db import models


class SnmpVersion(models.TextChoices):
    """SNMP version spoken to a device: v2c (community) or v3 (USM user, RFC 3414)."""

    V2C = "2c", "SNMPv2c"
    V3 = "3", "SNMPv3"


class AuthProtocol(models.TextChoices):
    """SNMPv3 USM authentication (RFC 3414 HMAC-MD5/SHA-96, RFC 7860 HMAC-SHA-2)."""

    NONE = "none", "none"
    MD5 = "md5", "HMAC-MD5-96"
    SHA = "sha", "HMAC-SHA-96"
    SHA224 = "sha224", "HMAC-SHA-224"
    SHA256 = "sha256", "HMAC-SHA-256"
    SHA384 = "sha384", "HMAC-SHA-384"
    SHA512 = "sha512", "HMAC-SHA-512"


class PrivProtocol(models.TextChoices):
    """SNMPv3 USM privacy (RFC 3414 CBC-DES, RFC 3826 CFB-AES-128, and the common 3DES/AES-192/256)."""

    NONE = "none", "none"
    DES = "des", "CBC-DES"
    TDES = "3des", "3DES-EDE"
    AES128 = "aes128", "CFB-AES-128"
    AES192 = "aes192", "CFB-AES-192"
    AES256 = "aes256", "CFB-AES-256"


class PollStatus(models.TextChoices):
    """Outcome of a device's last poll."""

    NEVER = "never", "Never polled"
    OK = "ok", "OK"
    UNREACHABLE = "unreachable", "Unreachable (no answer)"
    AUTH_FAILED = "auth", "Credentials refused"
    FAILED = "failed", "Failed"
