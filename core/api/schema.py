"""drf-spectacular post-processing: make the OpenAPI schema tell the truth where spectacular's
introspection cannot see it (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``).

* ``?brief=1`` switches an operation's serializer (``core.api.views.BriefModeMixin``): its 200
  response is the full form *or* the brief one (``anyOf``; the brief form's fields are a subset,
  so ``oneOf`` would reject every full object).
* A serializer's brief form (``nested=True``, ``core.api.serializers.BaseModelSerializer``) is the
  component ``Brief<Name>`` beside ``<Name>`` (:class:`AutoSchema`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi

REF = "#/components/schemas/"


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's schema, with the brief form of a serializer (``nested=True``) named
    ``Brief<Name>``: one serializer class gives two components (``Node`` and ``BriefNode``)."""

    def get_serializer_name(self, serializer, direction) -> str:
        name = super().get_serializer_name(serializer, direction)
        return "Brief" + name if getattr(serializer, "nested", False) else name


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


def lib_doc_excludes() -> list[type]:
    """``SPECTACULAR_SETTINGS["GET_LIB_DOC_EXCLUDES"]``: the base classes whose docstrings do not
    describe a component (drf-spectacular's DRF classes and the kernel's serializer base, which
    would otherwise describe every serializer without a docstring of its own)."""
    from drf_spectacular.plumbing import get_lib_doc_excludes

    from .serializers import BaseModelSerializer

    return [*get_lib_doc_excludes(), BaseModelSerializer]


def brief_alternatives(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """Postprocessing hook: responses of operations with a ``brief`` query parameter become
    ``anyOf [full, brief]`` (for paginated lists, the ``results`` items); each ``Brief<Name>``
    component says it is the brief form of ``<Name>``."""
    components = result.get("components", {}).get("schemas", {})
    for name, schema in components.items():
        if name.startswith("Brief") and name.removeprefix("Brief") in components:
            schema["description"] = (
                f"The brief form of {name.removeprefix('Brief')} (its serializer's Meta.brief_fields: id, "
                "url, display, natural key): how other objects name it, and what ?brief=1 answers."
            )
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


#: the default error answers every operation may give, beyond what its view documents itself:
#: status -> (description, component); added by :func:`default_error_responses`
ERROR_COMPONENT = "ErrorDetail"
VALIDATION_COMPONENT = "ValidationErrors"
_ERROR_SCHEMAS = {
    ERROR_COMPONENT: {
        "type": "object",
        "description": "An error: ``detail`` says what went wrong (DRF's and Weft's error answers); "
        "some errors add fields of their own (``code``, the file's ``line``).",
        "properties": {"detail": {"type": "string"}},
        "additionalProperties": {},
    },
    VALIDATION_COMPONENT: {
        "type": "object",
        "description": "Bad input: ``{field: [messages]}`` per refused field, ``non_field_errors`` "
        "for the whole body, or ``{detail: message}``.",
        "additionalProperties": {},
    },
}
_WRITES = {"post", "put", "patch", "delete"}


def _error(description: str, component: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF + component}}},
    }


def default_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """Postprocessing hook: document the error answers every operation can give (issue 22: 202
    schemathesis cases met undocumented status codes), where the view did not document them
    itself — all JSON (``core.api.errors``):

    * 400 bad input (a field, a filter or query parameter, a malformed body; also a request
      Django refuses, e.g. too many fields), 401 no or bad credentials, 403 a role too low;
    * 404 for an operation with a path parameter (no such object, or one the caller may not see);
    * 409 for a write (a uniqueness race: ``core.api.errors.exception_handler``);
    * 415 for an operation with a request body (a media type it does not parse).
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in _ERROR_SCHEMAS.items():
        schemas.setdefault(name, schema)
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            wanted = {
                "400": _error("Bad input.", VALIDATION_COMPONENT),
                "401": _error("No credentials, or a token or session that is not valid.", ERROR_COMPONENT),
                "403": _error("Not allowed for this user's role (or tenant).", ERROR_COMPONENT),
            }
            if any(p.get("in") == "path" for p in operation.get("parameters", [])):
                wanted["404"] = _error("No such object (or not one this user may see).", ERROR_COMPONENT)
            if method in _WRITES:
                wanted["409"] = _error(
                    "Conflict: another request changed the same object meanwhile.", ERROR_COMPONENT
                )
            if "requestBody" in operation:
                wanted["415"] = _error("Unsupported media type.", ERROR_COMPONENT)
            for status, response in wanted.items():
                responses.setdefault(status, response)
    return result
