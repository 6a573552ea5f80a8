"""Device credentials at rest: encrypted with the environment's key, rotation, a changed key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from devices import crypto
from devices.models import Device


def test_stored_encrypted_and_decrypted_in_memory(db, settings):
    from fabric.models import Fabric

    settings.WEFT_CREDENTIALS_KEYS = [Fernet.generate_key().decode()]
    d = Device(
        fabric=Fabric.objects.create(name="eth"), name="sw1", address="127.0.0.1", version="3", user="u"
    )
    d.set_secret("community", "s3cret-community")
    d.set_secret("auth_key", "auth-pass-phrase")
    d.save()
    row = Device.objects.filter(pk=d.pk).values("community_enc", "auth_key_enc", "priv_key_enc").get()
    assert "s3cret" not in row["community_enc"] and row["community_enc"].startswith("gAAAA")
    assert row["priv_key_enc"] == ""
    t = Device.objects.get(pk=d.pk).target()
    assert (t.community, t.auth_key, t.priv_key) == ("s3cret-community", "auth-pass-phrase", "")
    assert "s3cret" not in repr(t) and "auth-pass" not in repr(t)


def test_rotation_and_changed_key(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.WEFT_CREDENTIALS_KEYS = [old]
    token = crypto.encrypt("community-a")
    settings.WEFT_CREDENTIALS_KEYS = [new, old]  # rotated: the new key first, the old one still reads
    assert crypto.decrypt(token) == "community-a"
    settings.WEFT_CREDENTIALS_KEYS = [new]
    with pytest.raises(crypto.CredentialError, match="WEFT_CREDENTIALS_KEY"):
        crypto.decrypt(token)


def test_bad_key_in_environment_is_refused(monkeypatch):
    from weft.env import env_fernet_keys

    monkeypatch.setenv("WEFT_CREDENTIALS_KEY", "not-a-key")
    with pytest.raises(ImproperlyConfigured, match="WEFT_CREDENTIALS_KEY: key 1 is not a Fernet key") as exc:
        env_fernet_keys("WEFT_CREDENTIALS_KEY")
    assert "not-a-key" not in str(exc.value)
