#!/usr/bin/env python3
"""Writes tests/fixtures/json_schema/cases.json, which tests/core/schema_matcher_test.cpp reads.

For each schema below it generates instances shaped the way SchemaMatcher writes them (keys in
schema order, extra keys last, integers without a fraction, compact or indented JSON) with random
violations (wrong types, bounds, missing required keys, extra keys, enum misses...), plus random
byte mutations of them, and labels each text with the `jsonschema` package's verdict
(Draft202012Validator, or the draft a schema names; json.loads failing = invalid). The C++ test checks that the matcher
accepts exactly the "valid" texts and refuses every "invalid" one. Mutations that happen to be
valid are dropped: they may be valid instances outside the matcher's canonical subset (keys out
of schema order, say), which the matcher refuses by design.

Run from anywhere: python3 scripts/make_schema_fixtures.py. It runs itself inside the test venv
(.brigade/venv, made by scripts/python-env.sh, which installs jsonschema). Deterministic (seeded);
CI never runs it: cases.json is committed.
"""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".brigade" / "venv"
OUT = ROOT / "tests" / "fixtures" / "json_schema" / "cases.json"
N_INSTANCES = 60   # generated per schema (valid and invalid together)
N_MUTATIONS = 40   # byte mutations per schema


def ensure_venv():
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    subprocess.check_call(["bash", str(ROOT / "scripts" / "python-env.sh"), "setup"])
    python = VENV / "bin" / "python"
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 6},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "format": "hostname", "description": "ignored annotation (a format brigade does not enforce)"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
            "active": {"type": "boolean"},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "tree": {
        "$ref": "#/$defs/node",
        "$defs": {"node": {
            "type": "object",
            "properties": {"value": {"type": "integer"},
                           "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["value"], "additionalProperties": False}},
    },
    "optional_fields": {  # pydantic's Optional[...]
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "A"},
            "b": {"type": ["integer", "null"]},
            "c": {"oneOf": [{"type": "number"}, {"type": "null"}]},
        },
        "required": ["a", "b", "c"],
        "additionalProperties": False,
    },
    "tuple": {
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 3},
                        {"type": "boolean"}],
        "items": False,
        "minItems": 2,
    },
    "string_map": {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
        "additionalProperties": {"type": "string", "maxLength": 4},
    },
    "enums": {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue", "gr\u00fcn"]},
            "mixed": {"enum": [1, 12, "1", None, True, [1, 2], {"k": "v"}]},
            "fixed": {"const": "v1"},
            "typed": {"type": "string", "enum": ["x", 2, "y"]},
        },
        "required": ["color", "fixed"],
        "additionalProperties": False,
    },
    "numbers": {
        "type": "object",
        "properties": {
            "x": {"type": "number"},
            "n": {"type": "integer", "minimum": -20, "maximum": -10},
            "big": {"type": "integer", "minimum": 1000},
            "any_int": {"type": "integer"},
        },
        "required": ["x", "n"],
        "additionalProperties": False,
    },
    "tagged_union": {
        "type": "object",
        "properties": {"shape": {"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}},
             "required": ["kind", "r"], "additionalProperties": False},
            {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "integer"},
                                              "h": {"type": "integer"}},
             "required": ["kind", "w", "h"], "additionalProperties": False},
        ]}},
        "required": ["shape"],
        "additionalProperties": False,
    },
    "root_array": {
        "type": "array",
        "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "integer"}},
                  "required": ["k"], "additionalProperties": False},
        "minItems": 1,
        "maxItems": 3,
    },
    "draft7": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"pt": {"type": "array", "items": [{"type": "integer"}, {"type": "integer"}],
                               "additionalItems": False, "minItems": 2}},
        "type": "object",
        "properties": {"from": {"$ref": "#/definitions/pt"}, "to": {"$ref": "#/definitions/pt"}},
        "required": ["from", "to"],
        "additionalProperties": False,
    },
    "free_values": {
        "type": "object",
        "properties": {"meta": True, "list": {"type": "array"}},
        "required": ["meta"],
        "additionalProperties": True,
    },
    "unicode_strings": {
        "type": "object",
        "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 3}},
        "required": ["s"],
        "additionalProperties": False,
    },
}

ALPHABET = ["a", "b", "z", " ", "\u00e9", "\u4e2d", "\U0001F600", "\"", "\\", "\n", "\u0001", "/"]


class Generator:
    """Instances of a schema in the matcher's canonical shape, with violations at rate p."""

    def __init__(self, root, rng, p):
        self.root, self.rng, self.p = root, rng, p

    def resolve(self, s):
        while isinstance(s, dict) and "$ref" in s:
            node = self.root
            for part in s["$ref"][2:].split("/"):
                node = node[part]
            s = node
        return s

    def bad(self):
        return self.rng.random() < self.p

    def string(self, lo=0, hi=5):
        return "".join(self.rng.choice(ALPHABET) for _ in range(self.rng.randint(lo, hi)))

    def any_value(self, depth):
        kind = self.rng.choice(["obj", "arr", "str", "int", "num", "lit"] if depth < 3 else ["str", "int", "lit"])
        if kind == "obj":
            return {self.string(0, 3): self.any_value(depth + 1) for _ in range(self.rng.randint(0, 2))}
        if kind == "arr":
            return [self.any_value(depth + 1) for _ in range(self.rng.randint(0, 2))]
        if kind == "str":
            return self.string()
        if kind == "int":
            return self.rng.randint(-1000, 1000)
        if kind == "num":
            return self.rng.choice([0.5, -2.25, 1e-7, 3.5e20])
        return self.rng.choice([True, False, None])

    def wrong_type(self, depth):
        return self.rng.choice([self.string(), 7, -3.5, True, None, [1], {"q": 1}])

    def value(self, s, depth=0):
        s = self.resolve(s)
        if s is True or s == {}:
            return self.any_value(depth)
        if self.bad():
            return self.wrong_type(depth)
        if "enum" in s or "const" in s:
            options = s["enum"] if "enum" in s else [s["const"]]
            return self.rng.choice(options + ["nope", 99])
        for key in ("anyOf", "oneOf"):
            if key in s:
                return self.value(self.rng.choice(s[key]), depth)
        types = s.get("type", [])
        types = types if isinstance(types, list) else [types]
        if s.get("nullable"):
            types = types + ["null"]
        t = self.rng.choice(types)
        if t == "object":
            return self.obj(s, depth)
        if t == "array":
            return self.arr(s, depth)
        if t == "string":
            lo, hi = s.get("minLength", 0), s.get("maxLength", 6)
            return self.string(max(0, lo - 1) if self.bad() else lo, hi + 1 if self.bad() else hi)
        if t == "integer":
            lo = s.get("minimum", s.get("exclusiveMinimum", -10**6 - 1) + 1)
            hi = s.get("maximum", s.get("exclusiveMaximum", 10**6 + 1) - 1)
            if self.bad():
                return self.rng.choice([lo - 1, hi + 1, 2.5])
            return self.rng.randint(lo, min(hi, lo + 10**6))
        if t == "number":
            return self.rng.choice([0, -1, 2.5, -0.125, 1e-3, 6.02e23, self.rng.randint(-99, 99)])
        if t == "boolean":
            return self.rng.choice([True, False])
        return None

    def obj(self, s, depth):
        out = {}
        required = set(s.get("required", []))
        for name, sub in s.get("properties", {}).items():
            keep = name in required or self.rng.random() < 0.5
            if self.bad():
                keep = not keep
            if keep and depth < 4:
                out[name] = self.value(sub, depth + 1)
        extra = s.get("additionalProperties")
        if extra is not None and (extra is not False or self.bad()):
            for i in range(self.rng.randint(0, 2)):
                # No escapes in extra keys beside declared ones (the matcher writes them literally).
                name = "x" + "".join(c for c in self.string(0, 2) if c not in "\\\"\n\u0001") + str(i)
                if name not in s.get("properties", {}):
                    out[name] = self.any_value(depth + 1) if extra in (True, False) else self.value(extra, depth + 1)
        return out

    def arr(self, s, depth):
        prefix = s.get("prefixItems", s["items"] if isinstance(s.get("items"), list) else [])
        rest = s.get("additionalItems", True) if isinstance(s.get("items"), list) else s.get("items", True)
        lo, hi = s.get("minItems", 0), s.get("maxItems", 4)
        if rest is False:
            hi = min(hi, len(prefix))
        n = self.rng.randint(max(0, lo - 1) if self.bad() else lo, hi + 1 if self.bad() else hi)
        if depth >= 4:
            n = lo
        out = []
        for i in range(n):
            sub = prefix[i] if i < len(prefix) else rest
            out.append(self.value(sub if sub is not False else {}, depth + 1))
        return out


def dump(value, rng):
    style = rng.randint(0, 2)
    if style == 0:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if style == 1:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=2)


def verdict(validator, text):
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return validator.is_valid(value)


def mutate(text, rng):
    b = bytearray(text.encode())
    for _ in range(rng.randint(1, 2)):
        op, at = rng.randint(0, 2), rng.randrange(len(b) + 1)
        byte = rng.choice(b'{}[]:,"\\ 0123456789-.eaxtn')
        if op == 0:
            b.insert(at, byte)
        elif op == 1 and at < len(b):
            del b[at]
        elif at < len(b):
            b[at] = byte
    return b.decode("utf-8", errors="replace")


def main():
    ensure_venv()
    import jsonschema

    rng = random.Random(20261201)
    cases = []
    for name, schema in SCHEMAS.items():
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        validator = cls(schema)
        valid, invalid = set(), set()
        for i in range(N_INSTANCES * 4):
            if len(valid) + len(invalid) >= N_INSTANCES:
                break
            text = dump(Generator(schema, rng, 0.0 if i % 2 == 0 else 0.08).value(schema), rng)
            (valid if verdict(validator, text) else invalid).add(text)
        base = sorted(valid)
        for _ in range(N_MUTATIONS):
            text = mutate(rng.choice(base), rng)
            if not verdict(validator, text) and text not in valid:
                invalid.add(text)
        cases.append({"name": name, "schema": schema, "valid": sorted(valid), "invalid": sorted(invalid)})
        print(f"{name}: {len(valid)} valid, {len(invalid)} invalid")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
