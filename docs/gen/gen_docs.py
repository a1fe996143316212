#!/usr/bin/env python3
"""docs/gen/gen_docs.py (--check | --write) SG_TABLES ROOT

Generates the reference tables of the docs/ pages from the tables in code,
as librdkafka generates its CONFIGURATION.md:

  docs/configuration.md  config-keys   cfg_rows[] (lib/config_keys.c: type,
                                       default, bounds, spellings, doc) and,
                                       for the blocks that are not rows,
                                       schemas/config.schema.json
  docs/metrics.md        stats-line    the stats line's members, in the
                                       order it writes them, with their
                                       lib/metrics_list.h help
                         prometheus    the /metrics exposition's families:
                                       # TYPE, label names, # HELP
  docs/dlq.md            dlq-headers   SG_DLQ_HEADERS (lib/engine.h) and
                                       the reason codes (sg_reason_name)

SG_TABLES is the built docs/gen/sg_tables, which prints those tables as
JSON. Each table sits in its page between
    <!-- BEGIN GENERATED: NAME ... -->  and  <!-- END GENERATED: NAME -->
and everything outside the markers is the page's own prose.

--check prints a diff for every table that is not what the code gives and
exits 1 (0 when all are); --write rewrites them (`ninja -C build docs`).
Exit 2 on a usage or set-up error: a marker missing, the tables not
readable, an SG_DLQ_H_* name of lib/engine.h missing from SG_DLQ_HEADERS,
a stats-line member without a row.
"""

import difflib
import json
import os
import re
import subprocess
import sys

JSON_INT_MAX = 9007199254740992  # SG_JSON_INT_MAX, 2^53

# Stats-line members written by hand (lib/metrics.c), not by a row.
STATS_BY_HAND = {
    "dlq_total": ("counter", "DLQ records, all reasons"),
    "dlq_by_reason": ("counter", "DLQ records by reason: an object, "
                      "reason code -> count"),
}

KIND = {"COUNTER": "counter", "GAUGE": "gauge", "GAUGE_MS": "gauge",
        "LATEST": "gauge", "LATEST_MS": "gauge", "HIST": "histogram"}


class SetupError(Exception):
    pass


# --------------------------------------------------------------- helpers

def md(text):
    """A table cell: pipes escaped, one line."""
    return " ".join(text.replace("|", "\\|").split())


def human(name, value):
    """A number with its unit spelled out where the key's name has one."""
    if name.endswith("_ms") and value >= 1000:
        for unit, ms in (("d", 86400000), ("h", 3600000), ("min", 60000),
                         ("s", 1000)):
            if value % ms == 0:
                return f"{value} ({value // ms} {unit})"
        return str(value)
    if name.endswith("_bytes") and value >= 1024:
        for unit, b in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value % b == 0:
                return f"{value} ({value // b} {unit})"
    return str(value)


# --------------------------------------------------------- configuration

def resolve(schema, node):
    """The schema node, with a local $ref (and allOf of refs) merged in."""
    out = {}
    ref = node.get("$ref")
    if ref:
        out.update(resolve(schema, lookup(schema, ref)))
    for part in node.get("allOf", []):
        if "$ref" in part:
            sub = resolve(schema, lookup(schema, part["$ref"]))
            for k, v in sub.items():
                if k == "properties":
                    out.setdefault("properties", {}).update(v)
                else:
                    out.setdefault(k, v)
    for k, v in node.items():
        if k not in ("$ref", "allOf"):
            out[k] = v
    return out


def lookup(schema, ref):
    if not ref.startswith("#/"):
        raise SetupError(f"schema: a $ref that is not local: {ref}")
    node = schema
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def row_cells(row):
    name, typ = row["name"], row["type"]
    default = "—"
    if row["required"]:
        default = "required"
    elif typ == "enum":
        default = f'`"{row["names"][int(row["def"])]}"`'
    elif typ == "bool":
        default = "`true`" if row["def"] != "0" else "`false`"
    elif typ in ("string", "source"):
        if "def_text" in row:
            default = f'`"{row["def_text"]}"`'
        elif row["nullable"]:
            default = "`null`"
    else:
        default = human(name, int(row["def"]))
    allowed = ""
    if typ in ("integer", "unsigned", "size"):
        lo, hi = int(row["min"]), int(row["max"])
        allowed = f"≥ {lo}" if hi >= JSON_INT_MAX else f"{lo} – {hi}"
    elif typ == "enum":
        allowed = ", ".join(f"`{n}`" for n in row["names"])
    elif typ == "source":
        allowed = "a field source" + (", `null`" if row["nullable"] else "")
    elif typ == "bool":
        allowed = "`true`, `false`"
    reload = "yes" if row.get("reload") else ""
    return typ, default, allowed, reload, row["doc"]


def schema_cells(node):
    typ = node.get("type")
    if not typ:
        typ = "object" if "properties" in node or "additionalProperties" in \
            node else "—"
    if isinstance(typ, list):
        typ = " or ".join(typ)
    allowed = ""
    if "enum" in node:
        typ = "enum"
        allowed = ", ".join(f"`{v}`" for v in node["enum"])
    default = "—"
    if "default" in node:
        default = f"`{json.dumps(node['default'])}`"
    elif node.get("_required"):
        default = "required"
    return typ, default, allowed, "", node.get("description", "")


def config_entries(schema, rows, node, block, prefix, out, required=()):
    """Appends (key, type, default, allowed, meaning) for each member of the
    schema object @node at config block @block, in the schema's order."""
    by_name = {r["name"]: r for r in rows if r["block"] == block}
    for name, sub in node.get("properties", {}).items():
        sub = resolve(SCHEMA, sub)
        key = prefix + name
        if name in by_name:
            out.append((key,) + row_cells(by_name.pop(name)))
            continue
        child = block + "." + name if block else name
        if any(r["block"] == child for r in rows):
            config_entries(schema, rows, sub, child, key + ".", out,
                           sub.get("required", ()))
            continue
        if name == "topics":
            continue  # its own table
        sub = dict(sub, _required=name in required)
        out.append((key,) + schema_cells(sub))
    if by_name:
        raise SetupError(f"config rows of block '{block}' not in the "
                         f"schema: {sorted(by_name)}")


def render_config(tables, schema):
    global SCHEMA
    SCHEMA = schema
    rows = tables["config_rows"]
    root, topic = [], []
    config_entries(schema, rows, schema, "", "", root, schema.get("required", ()))
    tnode = resolve(schema, schema["$defs"]["topic"])
    config_entries(schema, rows, tnode, "topics.*", "", topic,
                   tnode.get("required", ()))
    head = ("| key | type | default | allowed | reload | meaning |\n"
            "|---|---|---|---|---|---|\n")
    out = ["### Top level", "", head.rstrip("\n")]
    for e in root:
        out.append("| `{}` | {} | {} | {} | {} | {} |".format(
            e[0], *map(md, e[1:])))
    out += ["", "### Per input topic, under `topics.<name>`", "", head.rstrip("\n")]
    for e in topic:
        out.append("| `{}` | {} | {} | {} | {} | {} |".format(
            e[0], *map(md, e[1:])))
    return "\n".join(out)


# --------------------------------------------------------------- metrics

def render_stats(tables):
    rows = {}
    for r in tables["metric_rows"]:
        if r["list"] in ("SG_LOOP_STATS", "SG_ENGINE_METRICS_HEAD",
                         "SG_ENGINE_METRICS_TAIL"):
            rows[r["name"]] = r
    out = ["| member | kind | meaning |", "|---|---|---|"]
    for m in tables["stats_members"]:
        if m in rows:
            kind, help_ = KIND[rows[m]["kind"]], rows[m]["help"]
        elif m in STATS_BY_HAND:
            kind, help_ = STATS_BY_HAND[m]
        else:
            raise SetupError(f"stats line member {m} has no row in "
                             "lib/metrics_list.h and no text in "
                             "gen_docs.py STATS_BY_HAND")
        out.append(f"| `{m}` | {kind} | {md(help_)} |")
    return "\n".join(out)


def unescape_help(text):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1),
                  text)


def render_prometheus(tables):
    fams = {}  # name -> [type, labels, help]
    order = []
    for line in tables["prometheus"].splitlines():
        m = re.match(r"# (HELP|TYPE) (\S+) ?(.*)$", line)
        if m:
            f = fams.setdefault(m.group(2), ["", [], ""])
            if m.group(2) not in order:
                order.append(m.group(2))
            if m.group(1) == "HELP":
                f[2] = unescape_help(m.group(3))
            else:
                f[0] = m.group(3)
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        if not m:
            continue
        name = m.group(1)
        fam = name if name in fams else re.sub(r"_(bucket|sum|count)$", "", name)
        if fam not in fams:
            raise SetupError(f"sample of no family: {line}")
        for lbl in re.findall(r'([a-zA-Z_]\w*)="', m.group(2) or ""):
            if lbl != "le" and lbl not in fams[fam][1]:
                fams[fam][1].append(lbl)
    out = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name in order:
        typ, labels, help_ = fams[name]
        out.append(f"| `{name}` | {typ} | {', '.join(labels)} | {md(help_)} |")
    return "\n".join(out)


# ------------------------------------------------------------------- DLQ

def render_dlq(tables, root):
    with open(os.path.join(root, "lib", "engine.h"), encoding="utf-8") as f:
        defined = set(re.findall(r"#define (SG_DLQ_H_\w+) ", f.read()))
    listed = {h["define"] for h in tables["dlq_headers"]}
    if defined - listed:
        raise SetupError("lib/engine.h: SG_DLQ_H_* names missing from "
                         f"SG_DLQ_HEADERS: {sorted(defined - listed)}")
    reasons = ", ".join(f"`{r}`" for r in tables["dlq_reasons"])
    out = ["| header | value |", "|---|---|"]
    for h in tables["dlq_headers"]:
        doc = h["doc"]
        if h["define"] == "SG_DLQ_H_REASON":
            doc += ": " + reasons
        out.append(f"| `{h['name']}` | {md(doc)} |")
    return "\n".join(out)


# --------------------------------------------------------- exit statuses

def render_exit(tables):
    out = ["| status | meaning |", "|---|---|"]
    for x in tables["exit_statuses"]:
        out.append(f"| {x['status']} | **{md(x['name'])}**: {md(x['doc'])} |")
    return "\n".join(out)


# ----------------------------------------------------------------- pages

def regions(tables, schema, root):
    return [
        ("docs/configuration.md", "config-keys",
         "from cfg_rows[] (lib/config_keys.c) and schemas/config.schema.json",
         render_config(tables, schema)),
        ("docs/metrics.md", "stats-line",
         "from lib/metrics_list.h and the stats line's writers",
         render_stats(tables)),
        ("docs/metrics.md", "prometheus",
         "from the /metrics exposition (lib/metrics_prom.c)",
         render_prometheus(tables)),
        ("docs/dlq.md", "dlq-headers",
         "from SG_DLQ_HEADERS (lib/engine.h) and sg_reason_name()",
         render_dlq(tables, root)),
        ("docs/operating.md", "exit-statuses",
         "from sg_exit_status() (lib/common.c)",
         render_exit(tables)),
    ]


def splice(text, name, source, body, path):
    begin = re.compile(r"<!-- BEGIN GENERATED: " + re.escape(name) + r" .*?-->\n")
    end = "<!-- END GENERATED: " + name + " -->"
    m = begin.search(text)
    e = text.find(end)
    if not m or e < m.end():
        raise SetupError(f"{path}: no markers for the generated table "
                         f"'{name}'")
    head = (f"<!-- BEGIN GENERATED: {name} {source}; by docs/gen/gen_docs.py,"
            " do not edit -->\n")
    return text[:m.start()] + head + body + "\n" + text[e:]


def main(argv):
    if len(argv) != 4 or argv[1] not in ("--check", "--write"):
        sys.stderr.write(__doc__.split("\n\n")[0] + "\n")
        return 2
    mode, tool, root = argv[1], argv[2], argv[3]
    try:
        tables = json.loads(subprocess.run([tool], check=True,
                                           stdout=subprocess.PIPE).stdout)
        with open(os.path.join(root, "schemas", "config.schema.json"),
                  encoding="utf-8") as f:
            schema = json.load(f)
        pages = {}
        for path, name, source, body in regions(tables, schema, root):
            full = os.path.join(root, path)
            if path not in pages:
                with open(full, encoding="utf-8") as f:
                    pages[path] = [f.read(), None]
            pages[path][1] = splice(pages[path][1] or pages[path][0], name,
                                    source, body, path)
    except (SetupError, OSError, subprocess.CalledProcessError,
            ValueError, KeyError) as e:
        sys.stderr.write(f"gen_docs.py: {e}\n")
        return 2
    stale = 0
    for path, (old, new) in pages.items():
        if old == new:
            continue
        stale += 1
        if mode == "--write":
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(new)
            print(f"wrote {path}")
        else:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True),
                f"{path} (committed)", f"{path} (generated)"))
    if mode == "--check":
        print(f"{len(pages)} pages checked, {stale} not as generated"
              + (": run `ninja -C build docs`" if stale else ""))
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
