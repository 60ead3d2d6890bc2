#!/usr/bin/env python3
"""Checks of deploy/ that need a parser rather than a shell one-liner (called by check.sh).

Each subcommand prints what it found and exits non-zero when something is wrong. Needs PyYAML
and promql-parser (check.sh installs both into target/deploy-venv).
"""
import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULE_FILES = [DEPLOY / "prometheus/rules/recording.yml", DEPLOY / "prometheus/rules/alerts.yml"]
DASHBOARD = DEPLOY / "grafana/dashboards/mcp-edge.json"


def fail(errors, what):
    for e in errors:
        print(f"  error: {e}")
    if errors:
        print(f"  {len(errors)} problem(s) in {what}")
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# PromQL: every metric name and selector label an expression refers to.

def grafana_to_promql(expr):
    """Replace Grafana's variables so the expression parses as PromQL."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)\}?", r"\1", expr)


def walk(node, out):
    """Collect (metric name, [label names in its matchers]) from a promql_parser AST."""
    import promql_parser as pp

    if node is None:
        return
    if isinstance(node, pp.VectorSelector):
        labels = [m.name for m in node.matchers.matchers]
        for group in node.matchers.or_matchers or []:
            labels += [m.name for m in group]
        name = node.name
        if not name:
            names = [m.value for m in node.matchers.matchers if m.name == "__name__"]
            name = names[0] if names else None
        out.append((name, [l for l in labels if l != "__name__"]))
        return
    if isinstance(node, pp.MatrixSelector):
        walk(node.vector_selector, out)
        return
    if isinstance(node, pp.Call):
        for a in node.args:
            walk(a, out)
        return
    if isinstance(node, pp.AggregateExpr):
        walk(node.expr, out)
        walk(node.param, out)
        return
    if isinstance(node, pp.BinaryExpr):
        walk(node.lhs, out)
        walk(node.rhs, out)
        return
    for attr in ("expr",):  # ParenExpr, UnaryExpr, SubqueryExpr
        if hasattr(node, attr):
            walk(getattr(node, attr), out)


def refs_of(expr):
    import promql_parser as pp

    out = []
    walk(pp.parse(expr), out)
    return out


def expressions():
    """(where, PromQL) for every expression in the rules and the dashboard."""
    found = []
    for f in RULE_FILES:
        for g in yaml.safe_load(f.read_text())["groups"]:
            for r in g["rules"]:
                found.append((f"{f.name}: {r.get('record') or r.get('alert')}", r["expr"]))
    dash = json.loads(DASHBOARD.read_text())

    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                found.append((f"dashboard: {p['title']} [{t.get('refId')}]", grafana_to_promql(t["expr"])))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q)
            if not m:
                found.append((f"dashboard variable {v['name']}", f"__unparsed__({q})"))
            else:
                found.append((f"dashboard variable {v['name']}", grafana_to_promql(m.group(1))))
    return found


def parse_exposition(text):
    """{family: (type, set of label names)} and the set of sample names, from /metrics text."""
    families, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(None, 3)
            families[name] = (typ.strip(), set())
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*?)\})?\s", line)
            if m:
                labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(3) or ""))
                samples.setdefault(m.group(1), set()).update(labels)
    return families, samples


def cmd_names(args):
    text = Path(args.metrics).read_text()
    families, samples = parse_exposition(text)
    allow = {}
    for line in Path(args.allow).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, status, reason = (line.split(None, 2) + ["", ""])[:3]
            allow[name] = (status, reason)
    recorded = {}
    for f in RULE_FILES:
        for g in yaml.safe_load(f.read_text())["groups"]:
            for r in g["rules"]:
                if "record" in r:
                    recorded[r["record"]] = f.name
    errors, pending, used = [], {}, {}
    for where, expr in expressions():
        if expr.startswith("__unparsed__"):
            errors.append(f"{where}: cannot read the variable query {expr[13:-1]!r}")
            continue
        try:
            refs = refs_of(expr)
        except Exception as e:  # promql_parser raises ValueError on bad syntax
            errors.append(f"{where}: PromQL does not parse: {e}")
            continue
        if not refs:
            errors.append(f"{where}: refers to no metric at all")
        for name, labels in refs:
            if name is None:
                errors.append(f"{where}: a selector without a metric name")
                continue
            used.setdefault(name, set()).add(where)
            if name in recorded:
                continue
            if name in samples:
                # Prometheus adds job and instance (and, with the Operator, pod/namespace/...).
                known = samples[name] | {"job", "instance"}
                for l in labels:
                    if l not in known:
                        errors.append(f"{where}: {name} has no label {l!r} (it has {sorted(samples[name])})")
                continue
            if name in allow:
                pending.setdefault(name, set()).add(where)
                continue
            fam = re.sub(r"_(bucket|sum|count)$", "", name)
            if fam in families and families[fam][0] == "histogram":
                errors.append(f"{where}: {name}: the histogram {fam} is exported but had no samples in the scrape")
            elif name in families:
                errors.append(f"{where}: {name} is declared but had no samples: exercise it in check.sh")
            else:
                errors.append(f"{where}: {name} is not exported by the gateway (not in the live /metrics)")
    exported = sorted(n for n in used if n in samples)
    print(f"  {len(exported)} exported metric names used: {', '.join(exported)}")
    print(f"  {len([n for n in used if n in recorded])} recording-rule names used, all defined in recording.yml")
    for name in sorted(allow):
        status, reason = allow[name]
        if name in samples:
            print(f"  NOTE {name}: listed as {status} in {Path(args.allow).name} but now exported; remove the entry")
        elif name in pending:
            print(f"  {status.upper()} {name}: {reason} (used by {len(pending[name])} expressions)")
    print(f"  PENDING_COUNT={sum(1 for n in pending if allow[n][0] == 'pending')}")
    fail(errors, "metric names")


# ---------------------------------------------------------------------------------------------

def cmd_alerts(args):
    readme = (DEPLOY / "README.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', readme))
    errors, n = [], 0
    for g in yaml.safe_load((DEPLOY / "prometheus/rules/alerts.yml").read_text())["groups"]:
        for r in g["rules"]:
            if "alert" not in r:
                continue
            n += 1
            a = r.get("annotations", {})
            for key in ("summary", "runbook"):
                if not str(a.get(key, "")).strip():
                    errors.append(f"{r['alert']}: no {key} annotation")
            if "severity" not in r.get("labels", {}):
                errors.append(f"{r['alert']}: no severity label")
            anchor = f"runbook-{r['alert'].lower()}"
            if f"#{anchor}" not in str(a.get("runbook", "")):
                errors.append(f"{r['alert']}: runbook does not point at deploy/README.md#{anchor}")
            if anchor not in anchors:
                errors.append(f"{r['alert']}: deploy/README.md has no <a id=\"{anchor}\"></a> section")
    print(f"  {n} alerts, each with summary, runbook and severity; runbook sections found in deploy/README.md")
    fail(errors, "alert annotations")


def cmd_dashboard(args):
    errors = []
    try:
        dash = json.loads(DASHBOARD.read_text())
    except json.JSONDecodeError as e:
        print(f"  error: {DASHBOARD} is not JSON: {e}")
        sys.exit(1)
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in dash:
            errors.append(f"no top-level {key!r}")
    variables = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    ids, n = set(), 0
    for p in dash.get("panels", []):
        if p.get("id") in ids:
            errors.append(f"panel id {p.get('id')} used twice")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            errors.append(f"panel {p.get('title')!r} has no gridPos")
        if p.get("type") == "row":
            continue
        n += 1
        if not p.get("targets"):
            errors.append(f"panel {p.get('title')!r} has no query")
        for t in p.get("targets", []):
            uid = (t.get("datasource") or p.get("datasource") or {}).get("uid", "")
            var = re.fullmatch(r"\$\{?(\w+)\}?", uid)
            if var and var.group(1) not in variables:
                errors.append(f"panel {p.get('title')!r} uses data source variable {uid} that is not defined")
            for v in re.findall(r"\$\{?(\w+)\}?", t.get("expr", "")):
                if not v.startswith("__") and v not in variables:
                    errors.append(f"panel {p.get('title')!r} uses ${v}, not a dashboard variable")
    print(f"  {DASHBOARD.name}: valid JSON, {n} panels, variables {sorted(variables)}")
    fail(errors, "the dashboard")


# ---------------------------------------------------------------------------------------------

def docs(path):
    return [d for d in yaml.safe_load_all(Path(path).read_text()) if d]


def cmd_k8s_xref(args):
    """What kubernetes-validate cannot see: the manifests agree with each other."""
    k8s = DEPLOY / "k8s"
    objs = {}
    for f in sorted(k8s.glob("*.yaml")):
        if f.name == "kustomization.yaml":
            continue
        for d in docs(f):
            objs[(d["kind"], d["metadata"]["name"])] = d
    errors = []
    kust = yaml.safe_load((k8s / "kustomization.yaml").read_text())
    listed = set(kust.get("resources", []))
    present = {f.name for f in k8s.glob("*.yaml")} - {"kustomization.yaml"}
    for f in sorted(listed - present):
        errors.append(f"kustomization.yaml lists {f}, which does not exist")
    for f in sorted(present - listed):
        errors.append(f"{f} is not listed in kustomization.yaml")

    def get(kind, name):
        o = objs.get((kind, name))
        if o is None:
            errors.append(f"no {kind} {name}")
        return o or {}

    def selects(selector, labels):
        return all(labels.get(k) == v for k, v in selector.items())

    cm = get("ConfigMap", "mcp-edge-config")
    gw_cfg = yaml.safe_load(cm.get("data", {}).get("gateway.yaml", "{}")) or {}
    admin_port = int(str(gw_cfg.get("listen", {}).get("admin", ":0")).rsplit(":", 1)[1])
    mcp_port = int(str(gw_cfg.get("listen", {}).get("mcp", ":0")).rsplit(":", 1)[1])
    for host in ("admin", "mcp"):
        if not str(gw_cfg.get("listen", {}).get(host, "")).startswith("0.0.0.0:"):
            errors.append(f"ConfigMap gateway.yaml listen.{host} must bind 0.0.0.0 in a pod")

    for dep_name, svc_name in (("mcp-edge", "mcp-edge"), ("mcp-edge-backend", "mcp-edge-backend")):
        dep, svc = get("Deployment", dep_name), get("Service", svc_name)
        if not dep or not svc:
            continue
        tmpl = dep["spec"]["template"]
        if not selects(dep["spec"]["selector"]["matchLabels"], tmpl["metadata"]["labels"]):
            errors.append(f"Deployment {dep_name}: selector does not match its pod labels")
        if not selects(svc["spec"]["selector"], tmpl["metadata"]["labels"]):
            errors.append(f"Service {svc_name} does not select the pods of Deployment {dep_name}")
        c = tmpl["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        for sp in svc["spec"]["ports"]:
            if sp["targetPort"] not in ports:
                errors.append(f"Service {svc_name} port {sp['name']} targets {sp['targetPort']!r}, not a container port name")
        for probe in ("readinessProbe", "livenessProbe"):
            pr = c.get(probe, {})
            port = (pr.get("httpGet") or pr.get("tcpSocket") or {}).get("port")
            if port not in ports:
                errors.append(f"Deployment {dep_name} {probe} uses port {port!r}, not a container port name")
        sc = {**tmpl["spec"].get("securityContext", {}), **c.get("securityContext", {})}
        if not sc.get("runAsNonRoot") or not sc.get("runAsUser"):
            errors.append(f"Deployment {dep_name}: runAsNonRoot with a numeric runAsUser is required")
        for res in ("requests", "limits"):
            if not c.get("resources", {}).get(res):
                errors.append(f"Deployment {dep_name}: no resources.{res}")

    dep = get("Deployment", "mcp-edge")
    if dep:
        t = dep["spec"]["template"]
        c = t["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        if ports.get("admin") != admin_port or ports.get("mcp") != mcp_port:
            errors.append(f"gateway container ports {ports} do not match the ConfigMap's listen (mcp {mcp_port}, admin {admin_port})")
        if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
            errors.append("gateway readinessProbe must GET /readyz")
        if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz":
            errors.append("gateway livenessProbe must GET /healthz")
        if str(t["metadata"].get("annotations", {}).get("prometheus.io/port")) != str(admin_port):
            errors.append("prometheus.io/port annotation is not the admin port")
        if t["metadata"].get("annotations", {}).get("prometheus.io/scrape") != "true":
            errors.append("prometheus.io/scrape annotation missing")
        grace = t["spec"].get("terminationGracePeriodSeconds", 30)
        pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        if len(pre) != 2 or pre[0] != "sleep":
            errors.append("gateway preStop should be a short sleep")
        elif int(pre[1]) + 15 > grace:  # preStop + the gateway's drain (5s grace + 10s drain)
            errors.append(f"terminationGracePeriodSeconds {grace} leaves no room for preStop {pre[1]}s + a 15s drain")
        vols = {v["name"]: v for v in t["spec"].get("volumes", [])}
        for m in c.get("volumeMounts", []):
            if vols.get(m["name"], {}).get("configMap", {}).get("name") != "mcp-edge-config":
                errors.append(f"volume {m['name']} is not the gateway ConfigMap")
        args_ = c.get("args", [])
        if args_[:1] != ["serve"] or "/etc/mcp-edge/gateway.yaml" not in args_:
            errors.append(f"gateway args {args_} do not serve /etc/mcp-edge/gateway.yaml")

    backend = get("Deployment", "mcp-edge-backend")
    bsvc = get("Service", "mcp-edge-backend")
    secret = get("Secret", "mcp-edge-state-key")
    if backend:
        c = backend["spec"]["template"]["spec"]["containers"][0]
        envs = {e["name"]: e for e in c.get("env", [])}
        ref = envs.get("MCP_EDGE_STATE_KEY", {}).get("valueFrom", {}).get("secretKeyRef", {})
        if ref.get("name") != "mcp-edge-state-key" or ref.get("key") not in secret.get("stringData", {}):
            errors.append("backend MCP_EDGE_STATE_KEY does not come from the state-key Secret's key")
        if backend["spec"].get("replicas", 1) < 2:
            errors.append("backend pool should run several pods (they share the key)")
    if bsvc:
        instances = [i for p in gw_cfg.get("pools", {}).values() for i in p.get("instances", [])]
        want = {f"mcp-edge-backend:{p['port']}" for p in bsvc["spec"]["ports"]}
        if not set(instances) & want:
            errors.append(f"the gateway pools {instances} do not list the backend Service ({sorted(want)})")

    redis_url = (gw_cfg.get("redis") or {}).get("url")
    if redis_url:
        host_port = redis_url.split("://", 1)[1].rsplit("@", 1)[-1].split("/", 1)[0]
        host, _, port = host_port.partition(":")
        rsvc = get("Service", host)
        rdep = get("Deployment", host)
        if rsvc and int(port or 6379) not in [p["port"] for p in rsvc["spec"]["ports"]]:
            errors.append(f"redis.url {redis_url}: Service {host} has no port {port or 6379}")
        if rsvc and rdep and not selects(rsvc["spec"]["selector"], rdep["spec"]["template"]["metadata"]["labels"]):
            errors.append(f"Service {host} does not select the pods of Deployment {host}")

    hpa = get("HorizontalPodAutoscaler", "mcp-edge")
    if hpa and hpa["spec"]["scaleTargetRef"]["name"] != "mcp-edge":
        errors.append("HPA does not target Deployment mcp-edge")
    if hpa and not any(m.get("resource", {}).get("name") == "cpu" for m in hpa["spec"].get("metrics", [])):
        errors.append("HPA does not scale on CPU")
    pdb = get("PodDisruptionBudget", "mcp-edge")
    if pdb and dep and not selects(pdb["spec"]["selector"]["matchLabels"], dep["spec"]["template"]["metadata"]["labels"]):
        errors.append("PDB does not select the gateway pods")

    # ServiceMonitor (a CRD: no schema ships offline): checked structurally here.
    sm = get("ServiceMonitor", "mcp-edge")
    svc = objs.get(("Service", "mcp-edge"), {})
    if sm:
        if sm.get("apiVersion") != "monitoring.coreos.com/v1":
            errors.append("ServiceMonitor apiVersion must be monitoring.coreos.com/v1")
        spec = sm.get("spec", {})
        if not selects(spec.get("selector", {}).get("matchLabels", {}), svc.get("metadata", {}).get("labels", {})):
            errors.append("ServiceMonitor selector does not match the gateway Service's labels")
        svc_ports = {p["name"]: p for p in svc.get("spec", {}).get("ports", [])}
        for ep in spec.get("endpoints", []):
            unknown = set(ep) - {"port", "path", "interval", "scrapeTimeout", "honorLabels", "scheme",
                                 "relabelings", "metricRelabelings"}
            if unknown:
                errors.append(f"ServiceMonitor endpoint has unknown keys {sorted(unknown)}")
            if ep.get("port") not in svc_ports:
                errors.append(f"ServiceMonitor endpoint port {ep.get('port')!r} is not a port name of Service mcp-edge")
            elif svc_ports[ep["port"]]["port"] != admin_port:
                errors.append("ServiceMonitor scrapes a Service port other than the admin port")
            if ep.get("path", "/metrics") != "/metrics":
                errors.append("ServiceMonitor path is not /metrics")
    print(f"  {len(objs)} objects cross-checked: selectors, port names, probes, ConfigMap, Secret, HPA, PDB, ServiceMonitor")
    fail(errors, "the Kubernetes manifests")


def loopback_copy(cfg_text):
    """The config with each instance host replaced by 127.0.0.1 (the port kept), so that
    `mcp-edge check` can resolve it on a machine without those host names. Edits the text of
    `instances: [...]` lines only, so the line numbers in mcp-edge's errors stay those of the
    original (an instance list in another YAML style stays as is and fails to resolve)."""
    return re.sub(
        r"(?m)^(\s*instances:\s*\[)([^\]]*)\]",
        lambda m: m.group(1) + re.sub(r"[A-Za-z0-9_.-]+:(\d+)", r"127.0.0.1:\1", m.group(2)) + "]",
        cfg_text,
    )


def cmd_gateway_configs(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    container = (DEPLOY / "gateway.container.yaml").read_text()
    (out / "container.yaml").write_text(loopback_copy(container))
    cm = [d for d in docs(DEPLOY / "k8s/gateway-configmap.yaml") if d["kind"] == "ConfigMap"][0]
    (out / "configmap.yaml").write_text(loopback_copy(cm["data"]["gateway.yaml"]))
    print(f"  wrote {out}/container.yaml and {out}/configmap.yaml (instances resolved to 127.0.0.1)")


def cmd_prom_config(args):
    src = DEPLOY / "prometheus/prometheus.yml"
    cfg = yaml.safe_load(src.read_text())
    cfg.setdefault("global", {})
    cfg["global"]["scrape_interval"] = "1s"
    cfg["global"]["evaluation_interval"] = "1s"
    cfg["rule_files"] = [str((src.parent / f).resolve()) for f in cfg.get("rule_files", [])]
    jobs = [j for j in cfg["scrape_configs"] if j["job_name"] == "mcp-edge"]
    if not jobs:
        print("  error: prometheus.yml has no job mcp-edge")
        sys.exit(1)
    for j in jobs:
        j["scrape_interval"] = "1s"
        for sc in j.get("static_configs", []):
            sc["targets"] = [args.target]
    Path(args.out).write_text(yaml.safe_dump(cfg, sort_keys=False))
    print(f"  {args.out}: deploy/prometheus/prometheus.yml with target {args.target}, 1s intervals, rules {cfg['rule_files']}")


def cmd_dockerfile(args):
    """The Dockerfile agrees with the README and runs as a non-root user; print its HEALTHCHECK."""
    text = (DEPLOY / "Dockerfile").read_text()
    readme = (DEPLOY / "README.md").read_text()
    errors = []
    joined = re.sub(r"\\\n\s*", " ", text)
    stages = re.split(r"(?m)^FROM ", joined)[1:]
    if len(stages) < 2:
        errors.append("not a multi-stage build")
    build_cmds = [m.strip() for m in re.findall(r"(?m)^RUN (?:--mount=\S+\s+)*(cargo build[^&\n]*)", joined)]
    documented = re.findall(r"(?m)^\s*(cargo build --release --locked[^\n`]*)$", readme)
    if not build_cmds:
        errors.append("no `cargo build` in the build stage")
    elif not documented:
        errors.append("deploy/README.md documents no `cargo build --release --locked` command")
    elif build_cmds[0] != documented[0].strip():
        errors.append(f"the Dockerfile builds with {build_cmds[0]!r} but the README documents {documented[0].strip()!r}")
    runtime = stages[-1] if stages else ""
    users = re.findall(r"(?m)^USER\s+(\S+)", runtime)
    if not users:
        errors.append("the runtime stage sets no USER (it would run as root)")
    elif users[-1].split(":")[0] in ("0", "root"):
        errors.append(f"the runtime user is {users[-1]}")
    elif not users[-1].split(":")[0].isdigit():
        errors.append(f"USER {users[-1]}: use a numeric uid so Kubernetes runAsNonRoot can verify it")
    for need in ('ENTRYPOINT ["mcp-edge"]', 'CMD ["serve", "--config", "/etc/mcp-edge/gateway.yaml"]', "EXPOSE 8080 9090"):
        if need not in runtime:
            errors.append(f"the runtime stage lacks {need}")
    hc = re.search(r"(?m)^HEALTHCHECK .*?CMD (\[.*\])\s*$", runtime)
    if not hc:
        errors.append("no HEALTHCHECK CMD [...] in the runtime stage")
    else:
        cmd = json.loads(hc.group(1))
        if "/healthz" not in " ".join(cmd):
            errors.append("the HEALTHCHECK does not probe /healthz")
        if args.healthcheck_out:
            Path(args.healthcheck_out).write_text(json.dumps(cmd))
    if not errors:
        print(f"  multi-stage; build command {build_cmds[0]!r} = README; runtime USER {users[-1]}; HEALTHCHECK on /healthz")
    fail(errors, "deploy/Dockerfile")


def cmd_build_context(args):
    """Stage what the Dockerfile's build stage COPYs (minus /.dockerignore) into --out, and check
    that every include_str!/include_bytes! of the sources resolves inside it. check.sh then runs
    `cargo metadata` there: the manifest must be readable with only these files."""
    import fnmatch
    import shutil

    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    build = re.split(r"(?m)^FROM ", text)[1]
    ignore = [l.strip().rstrip("/") for l in (ROOT / ".dockerignore").read_text().splitlines()
              if l.strip() and not l.startswith("#")]

    def ignored(rel):
        parts = Path(rel).parts
        return any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(parts[0], pat)
                   or (pat.startswith("**/") and pat[3:] in parts) for pat in ignore)

    out, errors = Path(args.out), []
    for m in re.finditer(r"(?m)^COPY (?!--from)(.+)$", build):
        *srcs, dest = m.group(1).split()
        for src in srcs:
            if ignored(src):
                errors.append(f"COPY {src}: excluded by .dockerignore")
                continue
            p = ROOT / src
            if not p.exists():
                errors.append(f"COPY {src}: no such file in the repository")
            elif p.is_dir():
                shutil.copytree(p, out / src, ignore=lambda d, names: [n for n in names if ignored(str((Path(d) / n).relative_to(ROOT)))])
            else:
                (out / src).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(p, out / src)
    n = 0
    for f in (out / "src").rglob("*.rs") if (out / "src").exists() else []:
        for inc in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', f.read_text()):
            n += 1
            if not (f.parent / inc).resolve().exists():
                errors.append(f"{f.relative_to(out)} includes {inc}, which the image build context lacks (COPY it)")
    print(f"  staged the build stage's COPY sources in {out}; {n} include_str!/include_bytes! resolve")
    fail(errors, "the Docker build context")


def cmd_compose(args):
    """deploy/compose.yaml agrees with the configs it mounts (no compose engine here)."""
    text = (DEPLOY / "compose.yaml").read_text()
    errors = []
    # The Compose Specification, as the compose_spec crate (Rust, strict) reads it: unknown keys
    # and bad values are refused, like `docker compose config` would (no compose plugin here).
    import compose_spec

    try:
        spec = compose_spec.PyCompose.from_yaml(text)
        spec.validate()
        print(f"  compose-spec: valid; services {spec.service_names()}")
    except Exception as e:
        errors.append(f"compose-spec rejects deploy/compose.yaml: {e}")
    c = yaml.safe_load(text)
    s = c.get("services", {})
    backends = sorted(n for n in s if n.startswith("backend-"))
    if len(backends) != 3:
        errors.append(f"expected three backend services, found {backends}")
    keys = {str(s[b].get("environment", {}).get("MCP_EDGE_STATE_KEY")) for b in backends}
    if len(keys) != 1 or "None" in keys:
        errors.append("the backends do not all get the same MCP_EDGE_STATE_KEY")
    gw_cfg = yaml.safe_load((DEPLOY / "gateway.container.yaml").read_text())
    instances = {i for p in gw_cfg["pools"].values() for i in p["instances"]}
    for b in backends:
        cmd = s[b].get("command", [])
        listen = cmd[cmd.index("--listen") + 1] if "--listen" in cmd else ""
        want = f"{b}:{listen.rsplit(':', 1)[-1]}"
        if want not in instances:
            errors.append(f"{b} listens on {listen} but the gateway pools list {sorted(instances)}")
    gw = s.get("gateway", {})
    redis_url = (gw_cfg.get("redis") or {}).get("url")
    if redis_url:
        host = redis_url.split("://", 1)[1].rsplit("@", 1)[-1].split("/", 1)[0].partition(":")[0]
        if host not in s:
            errors.append(f"redis.url {redis_url} names {host}, which is not a compose service")
        elif host not in gw.get("depends_on", []):
            errors.append(f"the gateway does not depend on the {host} service")
    for v in gw.get("volumes", []) + s.get("prometheus", {}).get("volumes", []) + s.get("grafana", {}).get("volumes", []):
        host = v.split(":")[0]
        if not (DEPLOY / host).exists():
            errors.append(f"volume source {host} does not exist under deploy/")
    build = gw.get("build", {})
    if not (DEPLOY / build.get("context", "") / build.get("dockerfile", "")).exists():
        errors.append("the gateway's build context/dockerfile does not exist")
    admin_port = gw_cfg["listen"]["admin"].rsplit(":", 1)[1]
    prom = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    targets = [t for j in prom["scrape_configs"] for sc in j.get("static_configs", []) for t in sc["targets"]]
    if f"gateway:{admin_port}" not in targets:
        errors.append(f"prometheus.yml does not scrape gateway:{admin_port} ({targets})")
    ds = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    if not any(d.get("url") == "http://prometheus:9090" for d in ds["datasources"]):
        errors.append("the Grafana data source does not point at the compose Prometheus")
    if not errors:
        print(f"  3 backends share one key; gateway pools = {sorted(instances)}; mounts exist; Prometheus scrapes gateway:{admin_port}")
    fail(errors, "deploy/compose.yaml")


def cmd_k8s_loadtest(args):
    """The sharded load test (deploy/k8s/loadtest): an Indexed Job whose shard count, shard
    index, common start and report collection agree with each other and with the gateway."""
    lt = DEPLOY / "k8s/loadtest"
    errors = []
    kust = yaml.safe_load((lt / "kustomization.yaml").read_text())
    present = {f.name for f in lt.glob("*.yaml")} - {"kustomization.yaml"}
    if set(kust.get("resources", [])) != present:
        errors.append(f"kustomization.yaml lists {sorted(kust.get('resources', []))}, the directory has {sorted(present)}")
    if kust.get("namespace") != "mcp-edge":
        errors.append("the loadtest kustomization must use namespace mcp-edge (the gateway's)")
    base = yaml.safe_load((DEPLOY / "k8s/kustomization.yaml").read_text())
    if any("loadtest" in str(r) for r in base.get("resources", [])):
        errors.append("deploy/k8s/kustomization.yaml must not start the load test")
    jobs = [d for f in sorted(present) for d in docs(lt / f) if d["kind"] == "Job"]
    if len(jobs) != 1:
        fail([f"expected one Job, found {len(jobs)}"], "deploy/k8s/loadtest")
    job = jobs[0]
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    n = spec.get("completions")
    if spec.get("completionMode") != "Indexed":
        errors.append("the Job must use completionMode: Indexed (the completion index is the shard)")
    if spec.get("parallelism") != n:
        errors.append(f"parallelism {spec.get('parallelism')} != completions {n}: every shard must run at once")
    if spec.get("backoffLimitPerIndex") != 0:
        errors.append("backoffLimitPerIndex must be 0: a shard re-run later misses the common start")
    if pod.get("restartPolicy") != "Never":
        errors.append("restartPolicy must be Never")
    c = pod["containers"][0]
    argv = c.get("args", [])
    flags = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    if argv[:1] != ["loadtest"]:
        errors.append(f"the container must run `loadtest`, not {argv[:1]}")
    if flags.get("--shard") != f"$JOB_COMPLETION_INDEX/{n}":
        errors.append(f"--shard must be $JOB_COMPLETION_INDEX/{n} (completions), got {flags.get('--shard')!r}")
    if flags.get("--json") != "-":
        errors.append("--json=- is how a shard's report reaches its log")
    start = flags.get("--start-at", "")
    env = {e["name"]: e for e in c.get("env", [])}
    if not start.startswith("$") or start[1:] not in env:
        errors.append(f"--start-at {start!r} must name an environment variable of the container")
    svc = [d for d in docs(DEPLOY / "k8s/gateway-service.yaml") if d["kind"] == "Service"][0]
    port = {p["name"]: p["port"] for p in svc["spec"]["ports"]}["mcp"]
    want = f"http://{svc['metadata']['name']}:{port}/mcp"
    if flags.get("--target") != want:
        errors.append(f"--target must be the gateway Service, {want}, got {flags.get('--target')!r}")
    sc = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
    if not sc.get("runAsNonRoot") or not sc.get("runAsUser"):
        errors.append("runAsNonRoot with a numeric runAsUser is required")
    for res in ("requests", "limits"):
        if not c.get("resources", {}).get(res):
            errors.append(f"no resources.{res}")
    fail(errors, "deploy/k8s/loadtest")
    print(f"  Job {job['metadata']['name']}: {n} shards, Indexed, target {want}, start from ${start[1:]}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("names")
    p.add_argument("--metrics", required=True)
    p.add_argument("--allow", required=True)
    sub.add_parser("alerts")
    sub.add_parser("dashboard")
    sub.add_parser("k8s-xref")
    sub.add_parser("k8s-loadtest")
    sub.add_parser("compose")
    p = sub.add_parser("build-context")
    p.add_argument("--out", required=True)
    p = sub.add_parser("gateway-configs")
    p.add_argument("--out", required=True)
    p = sub.add_parser("prom-config")
    p.add_argument("--target", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("dockerfile")
    p.add_argument("--healthcheck-out")
    a = ap.parse_args()
    {
        "names": cmd_names, "alerts": cmd_alerts, "dashboard": cmd_dashboard, "k8s-xref": cmd_k8s_xref,
        "k8s-loadtest": cmd_k8s_loadtest,
        "compose": cmd_compose, "gateway-configs": cmd_gateway_configs, "prom-config": cmd_prom_config,
        "dockerfile": cmd_dockerfile, "build-context": cmd_build_context,
    }[a.cmd](a)


if __name__ == "__main__":
    main()
