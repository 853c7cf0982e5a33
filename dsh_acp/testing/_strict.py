"""The strict form of a JSON schema: an object accepts only the keys its schema names.

The official ACP schema leaves every object open, so a misspelled key (``raw_input``,
``current_value``) or a ``_meta`` key placed at the wrong level validates. The strict form adds
``unevaluatedProperties: false`` at every place where a value starts (the root, each property's
value, array items, map values) whose schema names properties anywhere in its composition.

Placing it there, and never inside ``$defs``, ``allOf``/``anyOf``/``oneOf`` branches, is what
keeps it correct: in draft 2020-12 ``unevaluatedProperties`` sees the properties evaluated by
every ``$ref`` and every successful branch below it, so an object whose branches add properties
(``SessionConfigOption``: ``id``/``name`` on the parent, ``type``/``options`` in a branch) is
checked as the union, whereas a restriction inside a branch would reject the parent's keys.
Open maps and ``_meta`` declare ``additionalProperties`` (every key is then evaluated), so they
stay open; a value with no properties at all (``rawInput``) is left alone, and so is a value
whose schema is a union with a branch that accepts anything (v2's error ``data``: a
``SessionNotFound`` object, or any other value). ``not`` and ``if`` are copied untouched: a
restriction under ``not`` would invert its meaning.
"""

from __future__ import annotations

from typing import Any

__all__ = ["strict_schema", "strict_wrapper"]

_BRANCH_LISTS = ("allOf", "anyOf", "oneOf")  # same value: the branches share the restriction above
_BRANCHES = ("then", "else")
_VALUE_MAPS = ("properties", "patternProperties")  # each entry describes a new value
_VALUES = ("additionalProperties", "items", "contains", "unevaluatedItems")
_DEFS_PREFIX = "#/$defs/"
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated", "$comment"})
"""Keys that say nothing about which values a schema accepts."""


class _Deriver:
    def __init__(self, document: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = document.get("$defs", {})
        self._names_cache: dict[str, bool] = {}

    def names_properties(self, node: Any, seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``node`` (through ``$ref`` and branches, for the same value) lists properties."""
        if not isinstance(node, dict):
            return False
        if node.get("properties"):
            return True
        if self._definition_names_properties(node.get("$ref"), seen):
            return True
        unions = [b for key in ("anyOf", "oneOf") for b in node.get(key, ())]
        if any(self.accepts_anything(branch) for branch in unions):
            return False  # any value is one of the union's: no key can be told apart as unknown
        branches = [b for key in _BRANCH_LISTS for b in node.get(key, ())]
        branches += [node[key] for key in _BRANCHES if key in node]
        return any(self.names_properties(branch, seen) for branch in branches)

    def _definition_names_properties(self, ref: Any, seen: frozenset[str]) -> bool:
        """Whether the definition ``ref`` points to lists properties (once per definition)."""
        if not isinstance(ref, str) or not ref.startswith(_DEFS_PREFIX):
            return False
        name = ref.removeprefix(_DEFS_PREFIX)
        if name in seen:
            return False
        if name not in self._names_cache:
            self._names_cache[name] = self.names_properties(self.defs.get(name), seen | {name})
        return self._names_cache[name]

    def accepts_anything(self, node: Any) -> bool:
        """Whether ``node`` (through a ``$ref``) is a schema with no constraint at all."""
        if not isinstance(node, dict):
            return node is True
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX) and set(node) - _ANNOTATIONS == {"$ref"}:
            return self.accepts_anything(self.defs.get(ref.removeprefix(_DEFS_PREFIX)))
        return all(key in _ANNOTATIONS or key.startswith("x-") for key in node)

    def derive(self, node: Any, starts_value: bool) -> Any:
        if not isinstance(node, dict):
            return node
        out = {key: self._derive_keyword(key, child) for key, child in node.items()}
        if starts_value and "unevaluatedProperties" not in node and self.names_properties(node):
            out["unevaluatedProperties"] = False
        return out

    def _derive_keyword(self, key: str, child: Any) -> Any:
        """A keyword's value in the strict form: the schemas under it derived, as the same value
        (branches, definitions) or as a value of its own (properties, items)."""
        if key in _BRANCH_LISTS and isinstance(child, list):
            return [self.derive(branch, False) for branch in child]
        if key == "$defs":
            return {name: self.derive(definition, False) for name, definition in child.items()}
        if key in _BRANCHES:
            return self.derive(child, False)
        if key in _VALUE_MAPS and isinstance(child, dict):
            return {name: self.derive(value, True) for name, value in child.items()}
        if key in _VALUES:
            return self.derive(child, True)
        if key == "prefixItems" and isinstance(child, list):
            return [self.derive(item, True) for item in child]
        return child  # annotations, constants, `not`, `if`: unchanged


def strict_schema(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with unknown keys rejected wherever a value's schema names its properties.

    A definition is made strict at the places that use it, so to validate a value against one
    definition wrap it: ``{"$defs": strict["$defs"], "$ref": "#/$defs/NAME",
    "unevaluatedProperties": False}`` (which ``strict_wrapper`` builds).
    """
    result: dict[str, Any] = _Deriver(document).derive(document, True)
    return result


def strict_wrapper(strict: dict[str, Any], definition: str) -> dict[str, Any]:
    """A schema validating one value against ``definition`` of a ``strict_schema`` result: the
    wrapper is where that value starts, so it carries the restriction."""
    wrapper: dict[str, Any] = {"$defs": strict["$defs"], "$ref": f"{_DEFS_PREFIX}{definition}"}
    if _Deriver(strict).names_properties(wrapper):
        wrapper["unevaluatedProperties"] = False
    return wrapper
