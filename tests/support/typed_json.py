"""Decode JSON the way the UFM API's clients do, so contract tests fail where a client would.

Two rule sets, restated from the languages' documentation:

* Go ``encoding/json`` (:func:`go_decode`; Volcano, ib-kubernetes): object keys match struct
  fields case-insensitively, unknown keys are ignored, missing keys and ``null`` leave the zero
  value; a JSON string into an ``int`` field, a number with a fraction into an ``int``, a number
  into a ``string``, an object where an array is expected (and so on) is an error
  (``UnmarshalTypeError``) and the whole ``Decode`` fails.
* Rust ``serde_json`` with ``#[derive(Deserialize)]`` (:func:`serde_decode`; NVIDIA Carbide):
  keys match exactly (or as renamed), unknown keys are ignored, a missing key or ``null`` is an
  error unless the field is ``Option`` (or ``#[serde(default)]``), integers must fit their type
  (``u8``, ``u16``, ``i32``) and have no fraction, a unit enum with ``rename_all = "lowercase"``
  takes exactly its lowercase names.

Types are written as: ``int``/``str``/``bool``/``float``; ``[T]`` a list; ``{"map": T}`` a map
of string keys; a ``dict`` of field name -> type for a struct; for serde also ``("int", lo, hi)``
an integer type, :class:`Opt` for ``Option``/``default``, :class:`Enum` for a unit enum.
"""

from __future__ import annotations

from dataclasses import dataclass


class DecodeError(ValueError):
    """The client's decoder would refuse the document (``str()`` says where)."""


@dataclass(frozen=True)
class Opt:
    """``Option<T>`` (missing or null is None) or ``#[serde(default)]`` (missing is ``default``)."""

    typ: object
    default: object = None


@dataclass(frozen=True)
class Enum:
    """A unit enum: the exact names it accepts."""

    names: tuple[str, ...]


def _kind(value) -> str:
    return type(value).__name__


def go_decode(value, typ, path: str = "$"):
    """``value`` decoded into Go type ``typ`` (see the module docstring).

    Raises:
        DecodeError: where ``encoding/json`` would fail.
    """
    if value is None:
        return _go_zero(typ)
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go int")
        if isinstance(value, float) and not value.is_integer():
            raise DecodeError(f"{path}: cannot unmarshal number {value} into Go int")
        return int(value)
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go float64")
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go string")
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go bool")
        return value
    if isinstance(typ, list):
        if not isinstance(value, list):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go slice")
        return [go_decode(v, typ[0], f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(typ, dict) and set(typ) == {"map"}:
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go map")
        return {k: go_decode(v, typ["map"], f"{path}.{k}") for k, v in value.items()}
    if isinstance(typ, dict):
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: cannot unmarshal {_kind(value)} into Go struct")
        out = {name: _go_zero(t) for name, t in typ.items()}
        lower = {name.lower(): name for name in typ}
        for key, v in value.items():
            name = key if key in typ else lower.get(key.lower())
            if name is not None:
                out[name] = go_decode(v, typ[name], f"{path}.{key}")
        return out
    raise TypeError(f"unknown Go type {typ!r}")


def _go_zero(typ):
    if typ is int:
        return 0
    if typ is float:
        return 0.0
    if typ is str:
        return ""
    if typ is bool:
        return False
    if isinstance(typ, list) or (isinstance(typ, dict) and set(typ) == {"map"}):
        return None
    return {name: _go_zero(t) for name, t in typ.items()}


def serde_decode(value, typ, path: str = "$"):
    """``value`` decoded into Rust type ``typ`` (see the module docstring).

    Raises:
        DecodeError: where ``serde_json`` would fail.
    """
    if isinstance(typ, Opt):
        return typ.default if value is None else serde_decode(value, typ.typ, path)
    if value is None:
        raise DecodeError(f"{path}: invalid type: null, expected {typ!r}")
    if typ is int or (isinstance(typ, tuple) and typ[0] == "int"):
        lo, hi = (typ[1], typ[2]) if isinstance(typ, tuple) else (-(1 << 63), (1 << 63) - 1)
        if isinstance(value, bool) or not isinstance(value, int):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected an integer")
        if not lo <= value <= hi:
            raise DecodeError(f"{path}: invalid value: {value}, expected an integer in {lo}..={hi}")
        return value
    if typ is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected f32")
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected a string")
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected a boolean")
        return value
    if isinstance(typ, Enum):
        if value not in typ.names:
            raise DecodeError(f"{path}: unknown variant {value!r}, expected one of {typ.names}")
        return value
    if isinstance(typ, list):
        if not isinstance(value, list):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected a sequence")
        return [serde_decode(v, typ[0], f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(typ, dict) and set(typ) == {"map"}:
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected a map")
        return {k: serde_decode(v, typ["map"], f"{path}.{k}") for k, v in value.items()}
    if isinstance(typ, dict):
        if not isinstance(value, dict):
            raise DecodeError(f"{path}: invalid type: {_kind(value)}, expected struct")
        out = {}
        for name, t in typ.items():
            if name not in value:
                if isinstance(t, Opt):
                    out[name] = t.default
                    continue
                raise DecodeError(f"{path}: missing field `{name}`")
            out[name] = serde_decode(value[name], t, f"{path}.{name}")
        return out
    raise TypeError(f"unknown serde type {typ!r}")
