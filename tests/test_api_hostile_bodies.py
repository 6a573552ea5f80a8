"""JSON bodies a careless or hostile API client sends (issue 26's walkthrough of the tenant API):
each is a 400 that says why, and the tenant is left as it was. Before: a body nested deeper than
Python's stack and a primary key of ``1e999`` answered 500 (RecursionError, OverflowError), and
``{"user": 1.5}`` made user 1 a member (the lookup truncated the number)."""

from __future__ import annotations

import pytest

from pools.models import Tenant, TenantMembership


@pytest.fixture
def tenant(users):
    t = Tenant.objects.create(name="acme")
    TenantMembership.objects.create(tenant=t, user=users["viewer"], role="viewer")
    return t


@pytest.mark.parametrize(
    "body, said",
    [
        ('{"members": [{"user": 1e999}]}', "beyond what JSON carries"),
        ('{"members": [{"user": -1e400, "role": "viewer"}]}', "beyond what JSON carries"),
        ('{"description": NaN}', "NaN is not a JSON value"),
        ('{"members": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deep"),
        (
            '{"members": [{"user": 1.5, "role": "operator"}]}',
            "Incorrect type. Expected pk value, received fractional number.",
        ),
    ],
    ids=["1e999", "-1e400", "NaN", "deep", "fractional-pk"],
)
def test_a_body_json_cannot_mean_is_a_400_and_changes_nothing(users, client_for, tenant, body, said):
    admin = client_for("admin", raise_request_exception=False)
    for method in (admin.patch, admin.put):
        answer = method(f"/api/pools/tenants/{tenant.pk}/", body, content_type="application/json")
        assert answer.status_code == 400, answer.content[:300]
        assert said in answer.content.decode()
    assert list(TenantMembership.objects.filter(tenant=tenant).values_list("user__username", "role")) == [
        (users["viewer"].username, "viewer")
    ]
    # a whole number written as a float is still the number
    answer = admin.patch(f"/api/pools/tenants/{tenant.pk}/", {"members": [{"user": float(users["operator"].pk)}]},
                         format="json")  # fmt: skip
    assert answer.status_code == 200 and [m["username"] for m in answer.json()["members"]] == [
        users["operator"].username
    ]
