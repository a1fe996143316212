#!/usr/bin/env python3
"""Checks that the JSON Schema and seqgate's own validator agree.

Every examples/*.json and examples/*.yaml (and deploy/demo/config.json)
must validate against schemas/config.schema.json AND
pass `seqgate --check-config FILE` (exit 0). A YAML file is read for the
schema by PyYAML, a YAML reader other than seqgate's: `seqgate
--print-config` of it and of PyYAML's reading written as JSON must be the
same, so the two readers agree on every value. And the effective
configuration of every example (`seqgate --print-config`, defaults filled
in) validates against the schema and loads again to the same text.

Every tests/schema/invalid/*.json must FAIL both: be invalid for the
schema, and make `seqgate --check-config` exit non-zero with an error
naming the key: each invalid file has a sibling NAME.expect holding the
dotted key path, and stderr must contain "KEY: ".

Usage: check_examples.py [PATH_TO_SEQGATE_BINARY]
  (default: $SEQGATE_BIN, else BUILD/seqgate under the repository root)

It also runs check_snapshot.py's checks: every tests/schema/snapshot/
KIND-VERDICT-NAME.json must be valid ("ok") or invalid ("bad") for
schemas/snapshot-KIND.schema.json (KIND: request, reply).

examples/orders.json is the example with every key (docs/configuration.md): every key the
schema gives a default must be in it: the root's and its blocks' (store,
batch, http, metrics), numbers and booleans with that default (a string,
such as instance_id, may show an example value), and its topic's keys in
the blocks it has (envelope, dedup, ordering; their values may show a
choice).

Prints one line per file and a last line "N passed, M failed"; exits 1 when
any check failed, 2 on a usage or set-up error. Needs the `jsonschema`
package (tests/run.sh installs it into a venv).
"""
import glob
import json
import os
import subprocess
import sys

try:
    import jsonschema
    import yaml
except ImportError as e:
    sys.stderr.write("check_examples.py: the jsonschema and PyYAML packages "
                     "are required (%s)\n" % e)
    sys.exit(2)

import check_snapshot  # noqa: E402 (same directory; needs jsonschema)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(ROOT, "schemas", "config.schema.json")


def load_doc(path):
    """The file's tree: JSON, or YAML (PyYAML) for a .yaml/.yml name."""
    with open(path, encoding="utf-8") as f:
        if path.endswith((".yaml", ".yml")):
            return yaml.safe_load(f)
        return json.load(f)


def schema_errors(validator, path, doc=None):
    """Returns a list of schema error texts ([] = valid); a file that is not
    JSON (YAML) counts as invalid."""
    if doc is None:
        try:
            doc = load_doc(path)
        except (OSError, ValueError, yaml.YAMLError) as e:
            return ["not JSON or YAML: %s" % e]
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(root)",
                        e.message)
            for e in validator.iter_errors(doc)]


def print_config(binary, path):
    """`seqgate --print-config PATH`: (exit code, stdout, stderr)."""
    proc = subprocess.run([binary, "--print-config", path],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def effective_problems(binary, validator, path):
    """The effective configuration of PATH: valid for the schema, and
    printed again from itself the same; a YAML file's also the same as that
    of PyYAML's reading of it."""
    rc, text, err = print_config(binary, path)
    if rc != 0:
        return ["--print-config exit %s: %s" % (rc, err.strip())]
    problems = ["effective config: schema: " + e for e in
                schema_errors(validator, path, json.loads(text))]
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        again = os.path.join(tmp, "effective.json")
        with open(again, "w", encoding="utf-8") as f:
            f.write(text)
        rc2, text2, err2 = print_config(binary, again)
        if rc2 != 0 or text2 != text:
            problems.append("--print-config of the effective config differs "
                            "(exit %s): %s" % (rc2, err2.strip()))
        if path.endswith((".yaml", ".yml")):
            other = os.path.join(tmp, "pyyaml.json")
            with open(other, "w", encoding="utf-8") as f:
                json.dump(load_doc(path), f)
            rc3, text3, err3 = print_config(binary, other)
            if rc3 != 0 or text3 != text:
                problems.append("PyYAML reads another configuration than "
                                "seqgate (exit %s): %s" % (rc3, err3.strip()))
    return problems


def check_config(binary, path):
    """Runs seqgate --check-config; returns (exit code, stderr text)."""
    try:
        proc = subprocess.run([binary, "--check-config", path],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


FULL_EXAMPLE = os.path.join(ROOT, "examples", "orders.json")


def defaults(schema, node, path, out):
    """Appends (dotted path, default, at_root) for every property of
    @p node, and of its nested objects and $refs into $defs, that has a
    default; at_root: not below "topics"."""
    ref = node.get("$ref", "")
    if ref.startswith("#/$defs/"):
        node = dict(schema["$defs"][ref[len("#/$defs/"):]], **node)
        node.pop("$ref")
    for key, sub in node.get("properties", {}).items():
        p = path + [key]
        if "default" in sub:
            out.append((p, sub["default"]))
        defaults(schema, sub, p, out)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and path == ["topics"]:
        defaults(schema, extra, path + ["*"], out)


def full_example_problems(schema):
    """What examples/orders.json lacks of the keys with a default."""
    with open(FULL_EXAMPLE, encoding="utf-8") as f:
        doc = json.load(f)
    found = []
    defaults(schema, schema, [], found)
    problems = []
    for path, default in found:
        nodes = [doc]
        for part in path:
            nodes = [v for n in nodes if isinstance(n, dict)
                     for v in (n.values() if part == "*" else
                               [n[part]] if part in n else [None])]
        name = ".".join(path)
        if path[0] == "topics" and len(path) > 3 and any(
                not isinstance(t, dict) or path[2] not in t
                for t in doc.get("topics", {}).values()):
            continue  # a topic block the example does not use (snapshot)
        if any(n is None for n in nodes) or not nodes:
            problems.append("%s: missing (default %s)" % (name, json.dumps(default)))
        elif (path[0] != "topics" and not isinstance(default, str)
              and nodes[0] != default):
            problems.append("%s: %s, not the default %s"
                            % (name, json.dumps(nodes[0]), json.dumps(default)))
    return problems


def report(rel, problems, must, ok):
    """Prints one file's verdict ("FAIL REL (MUST)" and its problems, or
    "ok   REL (OK)"); True when it passed."""
    if problems:
        print("FAIL %s (%s)" % (rel, must))
        for p in problems:
            print("     " + p)
        return False
    print("ok   %s (%s)" % (rel, ok))
    return True


def main(argv):
    if len(argv) > 2:
        sys.stderr.write("usage: %s [seqgate-binary]\n" % argv[0])
        return 2
    binary = (argv[1] if len(argv) == 2 else
              os.environ.get("SEQGATE_BIN", os.path.join(ROOT, "build", "seqgate")))
    if not os.access(binary, os.X_OK):
        sys.stderr.write("check_examples.py: %s is not an executable seqgate "
                         "binary (pass its path as the first argument)\n" % binary)
        return 2

    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    valid = sorted(glob.glob(os.path.join(ROOT, "examples", "*.json")) +
                   glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
    # the demo's configuration is an example too (deploy/demo.sh runs it);
    # the Kubernetes ones are checked by tests/deploy/check_k8s.py
    valid.append(os.path.join(ROOT, "deploy", "demo", "config.json"))
    invalid = sorted(glob.glob(os.path.join(ROOT, "tests", "schema", "invalid", "*.json")))
    if not valid or not invalid:
        sys.stderr.write("check_examples.py: no examples found under %s\n" % ROOT)
        return 2

    passed = failed = 0

    for path in valid:
        rel = os.path.relpath(path, ROOT)
        problems = ["schema: " + e for e in schema_errors(validator, path)]
        rc, err = check_config(binary, path)
        if rc != 0:
            problems.append("--check-config exit %s: %s" % (rc, err.strip()))
        else:
            problems += effective_problems(binary, validator, path)
        if report(rel, problems, "must be valid", "valid"):
            passed += 1
        else:
            failed += 1

    for path in invalid:
        rel = os.path.relpath(path, ROOT)
        problems = []
        expect_path = path[:-len(".json")] + ".expect"
        try:
            with open(expect_path, encoding="utf-8") as f:
                key = f.read().strip()
        except OSError:
            key = ""
        if not key:
            problems.append("missing or empty %s (the key the error must name)"
                            % os.path.relpath(expect_path, ROOT))
        if not schema_errors(validator, path):
            problems.append("schema: accepted, but the file is invalid")
        rc, err = check_config(binary, path)
        if rc == 0:
            problems.append("--check-config: exit 0, but the file is invalid")
        elif rc is None:
            problems.append("--check-config did not run: " + err)
        elif key and (key + ": ") not in err:
            problems.append("--check-config: stderr does not name %r: %s"
                            % (key, err.strip()))
        if report(rel, problems, "must be invalid", "invalid: %s" % key):
            passed += 1
        else:
            failed += 1

    if report(os.path.relpath(FULL_EXAMPLE, ROOT),
              full_example_problems(schema),
              "must hold every key with a default", "every key with a default"):
        passed += 1
    else:
        failed += 1

    try:
        snap_passed, snap_failed = check_snapshot.check()
    except (check_snapshot.SetupError, OSError, ValueError,
            jsonschema.SchemaError) as e:
        sys.stderr.write("check_examples.py: snapshot schemas: %s\n" % e)
        return 2
    passed += snap_passed
    failed += snap_failed

    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
