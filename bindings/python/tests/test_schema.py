"""The binding's types against include/cairn.schema.json, field by field.

The schema is made from the Rust types (crates/ffi/src/schema.rs), so a field a Rust report
gains fails here until a dataclass has it, and an option the C ABI gains fails until the
binding sends it. Every object the schema describes must be mapped to a dataclass below.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import cairn
from cairn import threads as t
from cairn import types as ty

from conftest import PACKAGE_DIR

SCHEMA_CANDIDATES = [
    PACKAGE_DIR.parent.parent / "include" / "cairn.schema.json",
    PACKAGE_DIR / "_rust" / "include" / "cairn.schema.json",
]

#: Each object of the schema's results: the dataclass that decodes it.
RESULTS: dict[str, type] = {
    "Action": ty.Action,
    "Admission": t.Admission,
    "Appended": t.Appended,
    "Attribution": ty.Attribution,
    "BadCopy": ty.BadCopy,
    "BrokenIndex": ty.BrokenIndex,
    "CacheTrim": ty.CacheTrim,
    "CaptureSettings": ty.CaptureSettings,
    "Change": ty.Change,
    "Checkpoint": t.Checkpoint,
    "CheckpointFailure": t.CheckpointFailure,
    "CheckpointRef": t.CheckpointRef,
    "ConversationReport": t.ConversationReport,
    "CopyReport": ty.CopyReport,
    "Delivery": t.Delivery,
    "Entry": t.Entry,
    "EntryInfo": ty.EntryInfo,
    "Event": t.Event,
    "FilesReport": t.FilesReport,
    "ForkReport": t.ForkReport,
    "GcPlan": ty.GcPlan,
    "GcReport": ty.GcReport,
    "KeptPath": ty.KeptPath,
    "MemoryItem": t.MemoryItem,
    "MemoryReport": t.MemoryReport,
    "PackPlan": ty.PackPlan,
    "Plan": ty.RestorePlan,
    "PruneReport": ty.PruneReport,
    "Recovery": ty.Recovery,
    "RemoteGcDone": ty.GcReport,
    "RemoteGcReport": ty.RemoteGcReport,
    "RestoreReport": ty.RestoreReport,
    "RewindReport": t.RewindReport,
    "RunInfo": t.RunInfo,
    "RunsReport": t.RunsReport,
    "Skipped": ty.Skipped,
    "SnapshotCheck": ty.SnapshotCheck,
    "SnapshotInfo": ty.SnapshotInfo,
    "SnapshotKept": ty.KeptPath,
    "SnapshotTaken": ty.SnapshotInfo,
    "Stats": ty.Stats,
    "Thread": t.Thread,
    "ThreadRuns": t.ThreadRuns,
    "Unreadable": ty.Unreadable,
    "Verified": ty.VerifyReport,
    "WalkInfo": ty.WalkInfo,
    "WatchStatus": ty.WatchStatus,
    "WorkspaceInfo": ty.WorkspaceInfo,
}

#: Objects of the schema that are an encoding, decoded to a plain value: a path that is not
#: UTF-8 (``{"hex": ...}``) becomes a ``str`` (``types.decode_path``).
ENCODINGS = {"Path"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    for p in SCHEMA_CANDIDATES:
        if p.is_file():
            return json.loads(p.read_text())
    pytest.skip("include/cairn.schema.json is not beside this package")


def properties(schema: dict[str, Any], s: dict[str, Any]) -> set[str]:
    """The property names of an object schema, its variants' (oneOf, anyOf, allOf) included."""
    names = set(s.get("properties", {}))
    for key in ("oneOf", "anyOf", "allOf"):
        for branch in s.get(key, []):
            if "$ref" not in branch:
                names |= properties(schema, branch)
    return names


def reached(schema: dict[str, Any], roots: list[Any]) -> set[str]:
    """The names of the `$defs` the schemas `roots` reach."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        s = todo.pop()
        if isinstance(s, dict):
            ref = s.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.removeprefix("#/$defs/")
                if name not in seen:
                    seen.add(name)
                    todo.append(schema["$defs"][name])
            todo.extend(s.values())
        elif isinstance(s, list):
            todo.extend(s)
    return seen


def objects(schema: dict[str, Any], which: str) -> dict[str, set[str]]:
    """The object `$defs` reached from every function's results (`which` "result") or from
    its JSON arguments (any other), with their property names. An object a result reaches too
    (a plan given back to apply) counts as a result."""
    fns = schema["functions"].values()
    results = reached(schema, [f["result"] for f in fns if "result" in f])
    inputs = reached(schema, [v for f in fns for k, v in f.items() if k != "result"])
    names = results if which == "result" else inputs - results
    defs = {n: properties(schema, schema["$defs"][n]) for n in names - ENCODINGS}
    return {n: p for n, p in defs.items() if p}


def sent_keys() -> set[str]:
    """Every name the package's modules can put in an options document: the keywords given to
    `_options(...)` and the string constants (dict keys, `d["..."]`)."""
    keys: set[str] = set()
    for path in Path(cairn.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_options":
                keys |= {k.arg for k in node.keywords if k.arg}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                keys.add(node.value)
    return keys


def test_every_property_of_every_result_is_a_field_of_its_dataclass(schema):
    unmapped = sorted(set(objects(schema, "result")) - set(RESULTS))
    assert not unmapped, f"objects of include/cairn.schema.json no dataclass decodes (add them to RESULTS): {unmapped}"
    missing = []
    for name, props in sorted(objects(schema, "result").items()):
        # A field named after a Python keyword takes a trailing underscore (``from_``).
        fields = {f.name.removesuffix("_") for f in dataclasses.fields(RESULTS[name])}
        missing += [f"{name}.{p} (cairn.{RESULTS[name].__name__})" for p in sorted(props - fields)]
    assert not missing, f"fields of the Rust reports the Python binding does not know: {missing}"


def test_every_option_of_the_c_abi_is_sent_by_the_binding(schema):
    keys = sent_keys()
    missing = [f"{name}.{p}" for name, props in sorted(objects(schema, "options").items()) for p in sorted(props - keys)]
    assert not missing, f"options of the C ABI the Python binding never sends: {missing}"


def test_every_dataclass_of_the_mapping_decodes_what_the_schema_names(schema):
    # The mapping goes stale too: a name that is no longer an object of the schema.
    stale = sorted(set(RESULTS) - set(objects(schema, "result")))
    assert not stale, f"RESULTS names objects include/cairn.schema.json no longer has: {stale}"
