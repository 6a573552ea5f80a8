"""Directory groups → roles and tenants (``accounts.directory.GroupMapping``, pure)."""

from __future__ import annotations

from accounts.directory import GroupMapping, normalize_dn
from accounts.roles import Role

G = "ou=groups,dc=example,dc=org"
LDAP = GroupMapping.from_pairs(
    (("viewer", f"cn=staff,{G}"), ("admin", f"CN=Weft Admins, {G}"), ("operator", f"cn=noc,{G}")),
    (("research", f"cn=research,{G}"), ("research:operator", f"cn=leads,{G}"), ("ops", f"cn=noc,{G}")),
    dn=True,
)


def test_normalize_dn():
    assert normalize_dn(" CN=Weft Admins , OU=Groups,DC=Example ") == "cn=weft admins,ou=groups,dc=example"


def test_highest_role_wins_and_dns_compare_without_case():
    assert LDAP.role_for([f"cn=staff,{G}", f"cn=weft admins,{G}".upper()]) == Role.ADMIN
    assert LDAP.role_for([f"cn=noc,{G}", f"cn=staff,{G}"]) == Role.OPERATOR
    assert LDAP.role_for([f"cn=research,{G}"]) == Role.NONE
    assert LDAP.role_for([]) == Role.NONE


def test_tenants_name_every_mapped_tenant():
    assert LDAP.tenants_for([f"cn=research,{G}", f"cn=leads,{G}"]) == {"research": "operator", "ops": None}
    assert LDAP.tenants_for([f"cn=noc,{G}"]) == {"research": None, "ops": "viewer"}
    assert LDAP.matched([f"cn=noc,{G}", "cn=other"]) == [f"cn=noc,{G}"]


def test_claim_values_compare_exactly():
    oidc = GroupMapping.from_pairs((("admin", "weft-admins"),), (), dn=False)
    assert oidc.role_for(["weft-admins"]) == Role.ADMIN
    assert oidc.role_for(["Weft-Admins"]) == Role.NONE
