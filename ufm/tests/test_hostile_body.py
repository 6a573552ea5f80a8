"""The UFM-compatible API given a JSON body nested deeper than Python's stack: a 400 naming the
body, as for any body that is not JSON (it was a 500 with a RecursionError traceback)."""

from __future__ import annotations


def test_a_body_nested_too_deep_is_not_json(fat_tree, ufm):
    body = '{"ports": ' + "[" * 50_000 + "]" * 50_000 + ', "ports_policy": "UNHEALTHY"}'
    answer = ufm("admin").put("/ufmRest/app/unhealthy_ports", body, content_type="application/json")
    assert answer.status_code == 400, answer.content[:300]
    assert "nested too deep" in answer.content.decode()
