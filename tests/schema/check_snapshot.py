#!/usr/bin/env python3
"""Checks the snapshot request/reply JSON Schemas against example documents.

schemas/snapshot-request.schema.json and schemas/snapshot-reply.schema.json
describe the records exchanged with an aggregate's authority (snapshot refetch,
semantics §4 step 1). Every tests/schema/snapshot/KIND-VERDICT-NAME.json is
validated against the schema of KIND ("request" or "reply"): VERDICT "ok"
files must be valid, "bad" files must be invalid.

check_examples.py runs these checks too (with the config examples); this
script runs them alone. Usage: check_snapshot.py. Prints one line per file
and "N passed, M failed"; exits 1 when a check failed, 2 on a set-up error.
Needs the `jsonschema` package.
"""
import glob
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    sys.stderr.write("check_snapshot.py: the jsonschema package is required\n")
    sys.exit(2)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMAS = {
    "request": os.path.join(ROOT, "schemas", "snapshot-request.schema.json"),
    "reply": os.path.join(ROOT, "schemas", "snapshot-reply.schema.json"),
}
EXAMPLES = os.path.join(ROOT, "tests", "schema", "snapshot")


class SetupError(Exception):
    """The schemas or the examples are missing or malformed."""


def load_validators():
    validators = {}
    for kind, path in SCHEMAS.items():
        with open(path, encoding="utf-8") as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        validators[kind] = jsonschema.Draft202012Validator(schema)
    return validators


def check(out=print):
    """Validates every example; returns (passed, failed). Raises SetupError
    when there is nothing to check or a file name does not follow
    KIND-VERDICT-NAME.json."""
    validators = load_validators()
    files = sorted(glob.glob(os.path.join(EXAMPLES, "*.json")))
    seen = {(k, v): 0 for k in SCHEMAS for v in ("ok", "bad")}
    passed = failed = 0

    for path in files:
        rel = os.path.relpath(path, ROOT)
        parts = os.path.basename(path).split("-", 2)
        if len(parts) < 3 or parts[0] not in SCHEMAS or parts[1] not in ("ok", "bad"):
            raise SetupError("%s: name must be (request|reply)-(ok|bad)-NAME.json" % rel)
        kind, verdict = parts[0], parts[1]
        seen[(kind, verdict)] += 1
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            errors = ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)",
                                  e.message)
                      for e in validators[kind].iter_errors(doc)]
        except ValueError as e:
            errors = ["not JSON: %s" % e]
        if verdict == "ok" and errors:
            failed += 1
            out("FAIL %s (must be a valid %s)" % (rel, kind))
            for e in errors:
                out("     " + e)
        elif verdict == "bad" and not errors:
            failed += 1
            out("FAIL %s (must be an invalid %s): accepted" % (rel, kind))
        else:
            passed += 1
            out("ok   %s (%s %s%s)" % (rel, "valid" if verdict == "ok" else "invalid",
                                      kind, ": " + errors[0][:100] if errors else ""))

    missing = [k + "-" + v for (k, v), n in seen.items() if n == 0]
    if missing:
        raise SetupError("no %s examples under %s" % (", ".join(missing),
                                                      os.path.relpath(EXAMPLES, ROOT)))
    return passed, failed


def main():
    try:
        passed, failed = check()
    except (SetupError, OSError, ValueError, jsonschema.SchemaError) as e:
        sys.stderr.write("check_snapshot.py: %s\n" % e)
        return 2
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
