#!/usr/bin/env python3
"""tests/deploy/check_k8s.py K8S_DIR SEQGATE [DOCKERFILE]

The Kubernetes examples hold together (kubeconform is not packaged by
Debian, PyPI or npm, so this is the check):
- every *.yaml of K8S_DIR parses, every document has apiVersion, kind and
  metadata.name, and every file is a resource of kustomization.yaml;
- every ConfigMap, Secret (and key), Service, PVC template a workload refers
  to is defined in the set; a StatefulSet's serviceName is a headless
  Service selecting its pods; a PodDisruptionBudget selects a workload;
- each seqgate container (image seqgate*): a native sidecar has
  restartPolicy Always; its configuration (the ConfigMap mounted where
  --config points) interpolated as seqgate does with the container's env
  has every ${VAR} defined, instance_id from the pod name, data_dir on a
  writable volume, http.address not on loopback and on the port the
  probes use; that endpoint, on the pod network, serves HTTPS
  (http.tls_server_config's files from a mounted Secret's keys, probes
  with scheme HTTPS) and asks the read API for credentials
  (basic_auth_users or bearer_tokens); liveness /healthz, readiness
  /readyz, a startupProbe of at least 5 minutes; the securityContext fields (runAsNonRoot, numeric
  runAsUser/runAsGroup equal to the Dockerfile's USER, fsGroup,
  seccompProfile RuntimeDefault, allowPrivilegeEscalation false,
  readOnlyRootFilesystem, capabilities drop ALL) and resources;
- the configuration passes `SEQGATE --check-config` (keys this seqgate
  does not know yet are named and left out of that run).
Exit 1 listing every problem.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploylib  # noqa: E402

problems = []


def bad(where, msg):
    problems.append(f"{where}: {msg}")


# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, $$ (the
# configuration's environment interpolation, Docker Compose's rules)
REF = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(text, env, where):
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1), m.group(2), m.group(3)
        val = env.get(name)
        if op == ":-" and not val:
            return arg
        if op == "-" and val is None:
            return arg
        if val is None:
            bad(where, f"${{{name}}}: no env entry defines {name}")
            return "x"
        return val
    return REF.sub(sub, text)


def walk_strings(node, fn):
    if isinstance(node, dict):
        return {k: walk_strings(v, fn) for k, v in node.items()}
    if isinstance(node, list):
        return [walk_strings(v, fn) for v in node]
    return fn(node) if isinstance(node, str) else node


def selects(selector, labels):
    want = (selector or {}).get("matchLabels", selector or {})
    return bool(want) and all(labels.get(k) == v for k, v in want.items())


def probe_port(probe, ports, where):
    get = (probe or {}).get("httpGet") or {}
    port = get.get("port")
    if isinstance(port, str):
        if port not in ports:
            bad(where, f"probe port {port!r} is not a named containerPort")
        port = ports.get(port)
    return get.get("path"), port


def check_seqgate(where, pod, c, is_init, objs, volumes, claims, seqgate, uid_gid, configs):
    if is_init and c.get("restartPolicy") != "Always":
        bad(where, "an initContainers seqgate needs restartPolicy: Always (native sidecar)")
    # env: fieldRef sample values, secretKeyRef checked against the Secret
    env = {}
    for e in c.get("env", []):
        vf = e.get("valueFrom")
        if vf is None:
            env[e["name"]] = str(e.get("value", ""))
        elif "fieldRef" in vf:
            path = vf["fieldRef"]["fieldPath"]
            env[e["name"]] = {"metadata.name": "seqgate-0", "status.podIP": "10.1.2.3"}.get(path, "v")
            env.setdefault("__field__" + path, e["name"])
        elif "secretKeyRef" in vf:
            ref = vf["secretKeyRef"]
            sec = objs.get(("Secret", ref["name"]))
            if sec is None:
                bad(where, f"env {e['name']}: Secret {ref['name']!r} is not defined")
            elif ref["key"] not in {**sec.get("data", {}), **sec.get("stringData", {})}:
                bad(where, f"env {e['name']}: Secret {ref['name']!r} has no key {ref['key']!r}")
            # a value of the form the key's name says (the Secret holds a
            # placeholder): a bcrypt hash, a token's digest, else any text
            env[e["name"]] = (
                "$2y$10$" + "a" * 53 if ref["key"].endswith("-bcrypt")
                else "sha256:" + "0" * 64 if ref["key"].endswith("-sha256")
                else "secret-value")
        elif "configMapKeyRef" in vf:
            ref = vf["configMapKeyRef"]
            if ("ConfigMap", ref["name"]) not in objs:
                bad(where, f"env {e['name']}: ConfigMap {ref['name']!r} is not defined")
            env[e["name"]] = "v"

    args = c.get("args", []) + c.get("command", [])
    if "--config" not in args:
        bad(where, "no --config argument")
        return
    cfg_path = args[args.index("--config") + 1]
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    mount = mounts.get(os.path.dirname(cfg_path))
    vol = volumes.get(mount["name"]) if mount else None
    if not vol or "configMap" not in vol:
        bad(where, f"--config {cfg_path}: not in a mounted ConfigMap volume")
        return
    cm = objs.get(("ConfigMap", vol["configMap"]["name"]))
    key = os.path.basename(cfg_path)
    if cm is None or key not in cm.get("data", {}):
        bad(where, f"ConfigMap {vol['configMap']['name']!r} with key {key!r} is not defined")
        return
    try:
        cfg = json.loads(cm["data"][key])
    except ValueError as e:
        bad(where, f"config {key} is not JSON: {e}")
        return
    cfg = walk_strings(cfg, lambda s: interpolate(s, env, where))
    configs.append((where, cfg))

    # instance_id: from the pod name, so each pod has its own transactional id
    raw = json.loads(cm["data"][key])
    pod_name_var = env.get("__field__metadata.name")
    iid_args = args[args.index("--instance-id") + 1] if "--instance-id" in args else ""
    if not pod_name_var or (f"${{{pod_name_var}}}" not in str(raw.get("instance_id", ""))
                            and f"$({pod_name_var})" not in iid_args):
        bad(where, "instance_id does not come from the pod name (fieldRef metadata.name)")

    # data_dir on a writable volume (emptyDir or a PVC)
    dd = cfg.get("data_dir")
    m = mounts.get(dd)
    if not m or m.get("readOnly"):
        bad(where, f"data_dir {dd!r} is not a writable volumeMount")
    elif m["name"] not in claims and "emptyDir" not in volumes.get(m["name"], {}) \
            and "persistentVolumeClaim" not in volumes.get(m["name"], {}):
        bad(where, f"data_dir volume {m['name']!r} is neither an emptyDir nor a PVC")

    # the endpoint: http.address where the probes reach it
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", []) if "name" in p}
    addr = (cfg.get("http") or {}).get("address", "127.0.0.1:9464")
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    if host in ("127.0.0.1", "localhost", "::1", ""):
        bad(where, f"http.address {addr!r}: the kubelet cannot reach a loopback address")
    # on the pod network: HTTPS, and credentials for the read API
    http = cfg.get("http") or {}
    tls = http.get("tls_server_config") or {}
    if not tls:
        bad(where, "http.address is on the pod network: http.tls_server_config is missing")
    for k in ("cert_file", "key_file"):
        f = tls.get(k)
        if not f:
            continue
        mount = mounts.get(os.path.dirname(f))
        vol = volumes.get(mount["name"]) if mount else None
        sec = objs.get(("Secret", (vol or {}).get("secret", {}).get("secretName")))
        if not vol or "secret" not in vol:
            bad(where, f"http.tls_server_config.{k} {f}: not in a mounted Secret volume")
        elif sec is None or os.path.basename(f) not in {**sec.get("data", {}),
                                                        **sec.get("stringData", {})}:
            bad(where, f"http.tls_server_config.{k} {f}: the Secret has no such key")
    if http.get("read_api", True) and not (http.get("basic_auth_users") or
                                           http.get("bearer_tokens")):
        bad(where, "the read API on the pod network without basic_auth_users or bearer_tokens")
    for name, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                       ("startupProbe", "/healthz")):
        probe = c.get(name)
        if not probe:
            bad(where, f"no {name}")
            continue
        p_path, p_port = probe_port(probe, ports, where)
        if p_path != path:
            bad(where, f"{name} path {p_path!r}, want {path}")
        if str(p_port) != port:
            bad(where, f"{name} port {p_port} is not http.address's port {port}")
        if tls and ((probe or {}).get("httpGet") or {}).get("scheme") != "HTTPS":
            bad(where, f"{name}: the endpoint serves HTTPS only, the probe needs scheme HTTPS")
    sp = c.get("startupProbe") or {}
    window = sp.get("periodSeconds", 10) * sp.get("failureThreshold", 3)
    if window < 300:
        bad(where, f"startupProbe allows {window} s: too short for a restore (>= 300)")

    # security
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    merged = {**psc, **csc}
    if merged.get("runAsNonRoot") is not True:
        bad(where, "runAsNonRoot is not true")
    for k in ("runAsUser", "runAsGroup"):
        if not isinstance(merged.get(k), int) or merged.get(k) == 0:
            bad(where, f"{k} is not a numeric non-root id")
    if uid_gid and (merged.get("runAsUser"), merged.get("runAsGroup")) != uid_gid:
        bad(where, f"runAsUser/runAsGroup {merged.get('runAsUser')}/{merged.get('runAsGroup')} "
                   f"!= the Dockerfile's USER {uid_gid[0]}:{uid_gid[1]}")
    if not isinstance(psc.get("fsGroup"), int):
        bad(where, "pod securityContext has no numeric fsGroup")
    if (merged.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        bad(where, "seccompProfile is not RuntimeDefault")
    if csc.get("allowPrivilegeEscalation") is not False:
        bad(where, "allowPrivilegeEscalation is not false")
    if csc.get("readOnlyRootFilesystem") is not True:
        bad(where, "readOnlyRootFilesystem is not true")
    if "ALL" not in ((csc.get("capabilities") or {}).get("drop") or []):
        bad(where, "capabilities do not drop ALL")
    res = c.get("resources") or {}
    if not res.get("requests") or not res.get("limits"):
        bad(where, "resources need requests and limits")


def dockerfile_user(path):
    if not path or not os.path.exists(path):
        return None
    users = re.findall(r"^USER\s+(\d+):(\d+)\s*$", open(path).read(), re.M)
    return (int(users[-1][0]), int(users[-1][1])) if users else None


def check_config(seqgate, where, cfg, schema_path):
    with open(schema_path) as f:
        known = set(json.load(f).get("properties", {}))
    unknown = sorted(set(cfg) - known)
    if unknown:
        print(f"check_k8s: {where}: {', '.join(unknown)} not known to this seqgate yet: "
              "checked above, left out of --check-config")
    cfg = {k: v for k, v in cfg.items() if k in known}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    try:
        p = subprocess.run([seqgate, "--check-config", f.name], capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            bad(where, f"seqgate --check-config: exit {p.returncode}: {p.stdout}{p.stderr}")
    finally:
        os.unlink(f.name)


def main():
    k8s, seqgate = sys.argv[1:3]
    dockerfile = sys.argv[3] if len(sys.argv) > 3 else None
    schema = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                          "schemas", "config.schema.json")
    files = sorted(f for f in os.listdir(k8s) if f.endswith((".yaml", ".yml")))
    kust = yaml.safe_load(open(os.path.join(k8s, "kustomization.yaml")))
    resources = kust.get("resources", [])
    objs, docs = {}, []
    for f in files:
        if f == "kustomization.yaml":
            continue
        if f not in resources:
            bad(f, "not a resource of kustomization.yaml")
        for i, d in enumerate(yaml.safe_load_all(open(os.path.join(k8s, f)))):
            if d is None:
                continue
            where = f"{f}#{i}"
            if not all(k in d for k in ("apiVersion", "kind")) or "name" not in d.get("metadata", {}):
                bad(where, "a document without apiVersion, kind and metadata.name")
                continue
            key = (d["kind"], d["metadata"]["name"])
            if key in objs:
                bad(where, f"{key} is defined twice")
            objs[key] = d
            docs.append((where, d))
    for r in resources:
        if r not in files:
            bad("kustomization.yaml", f"resource {r} does not exist")

    uid_gid = dockerfile_user(dockerfile)
    if dockerfile and not uid_gid:
        bad(dockerfile, "no numeric USER uid:gid")
    configs, workloads, seen_seqgate = [], [], 0
    for where, d in docs:
        if d["kind"] not in ("Deployment", "StatefulSet"):
            continue
        where = f"{where} {d['kind']}/{d['metadata']['name']}"
        spec = d["spec"]
        pod = spec["template"]["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        workloads.append(labels)
        if not selects(spec.get("selector"), labels):
            bad(where, "selector does not select the pod template's labels")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
        for v in volumes.values():
            if "configMap" in v and ("ConfigMap", v["configMap"]["name"]) not in objs:
                bad(where, f"volume {v['name']}: ConfigMap {v['configMap']['name']!r} is not defined")
            if "secret" in v and ("Secret", v["secret"]["secretName"]) not in objs:
                bad(where, f"volume {v['name']}: Secret {v['secret']['secretName']!r} is not defined")
        if d["kind"] == "StatefulSet":
            svc = objs.get(("Service", spec.get("serviceName")))
            if svc is None:
                bad(where, f"serviceName {spec.get('serviceName')!r}: no such Service")
            else:
                if svc["spec"].get("clusterIP") != "None":
                    bad(where, "its governing Service is not headless (clusterIP: None)")
                if not selects(svc["spec"].get("selector"), labels):
                    bad(where, "its Service does not select its pods")
        conts = [(c, True) for c in pod.get("initContainers", [])] + \
                [(c, False) for c in pod.get("containers", [])]
        for c, is_init in conts:
            for m in c.get("volumeMounts", []):
                if m["name"] not in volumes and m["name"] not in claims:
                    bad(where, f"container {c['name']}: volumeMount {m['name']!r} has no volume")
            if str(c.get("image", "")).split(":")[0].split("/")[-1] == "seqgate":
                seen_seqgate += 1
                check_seqgate(f"{where} container {c['name']}", pod, c, is_init, objs,
                              volumes, claims, seqgate, uid_gid, configs)
    for where, d in docs:
        if d["kind"] == "PodDisruptionBudget" and \
                not any(selects(d["spec"].get("selector"), l) for l in workloads):
            bad(where, "the PodDisruptionBudget selects no workload")
    if seen_seqgate < 2:
        bad(k8s, f"{seen_seqgate} seqgate containers, want the sidecar and the StatefulSet")
    for where, cfg in configs:
        check_config(seqgate, where, cfg, schema)

    return deploylib.report("check_k8s", problems, f"{len(docs)} documents, {seen_seqgate} seqgate containers")


if __name__ == "__main__":
    sys.exit(main())
