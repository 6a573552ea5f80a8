"""drf-spectacular post-processing: make the OpenAPI schema tell the truth where spectacular's
introspection cannot see it (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``).

* ``?brief=1`` switches an operation's serializer (``core.api.views.BriefModeMixin``): its 200
  response is the full form *or* the brief one (``anyOf``; the brief form's fields are a subset,
  so ``oneOf`` would reject every full object).
"""

from __future__ import annotations

from typing import Any

REF = "#/components/schemas/"


def _brief_ref(ref: str, components: dict[str, Any]) -> str | None:
    name = ref.removeprefix(REF)
    for candidate in (
        f"Brief{name}",
        f"Brief{name.removesuffix('Detail')}",
        f"Brief{name.removesuffix('List')}",
    ):
        if candidate in components:
            return REF + candidate
    return None


def brief_alternatives(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """Postprocessing hook: responses of operations with a ``brief`` query parameter become
    ``anyOf [full, brief]`` (for paginated lists, the ``results`` items)."""
    components = result.get("components", {}).get("schemas", {})
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            if not any(p.get("name") == "brief" for p in operation.get("parameters", [])):
                continue
            content = operation.get("responses", {}).get("200", {}).get("content", {})
            for media in content.values():
                schema = media.get("schema", {})
                ref = schema.get("$ref", "")
                if ref.startswith(REF + "Paginated") and ref.removeprefix(REF) in components:
                    page = components[ref.removeprefix(REF)]
                    items = page.get("properties", {}).get("results", {}).get("items", {})
                    brief = _brief_ref(items.get("$ref", ""), components)
                    if brief:
                        page["properties"]["results"]["items"] = {"anyOf": [items, {"$ref": brief}]}
                elif ref:
                    brief = _brief_ref(ref, components)
                    if brief:
                        media["schema"] = {"anyOf": [schema, {"$ref": brief}]}
    return result
