#!/usr/bin/env python3
"""Checks contrib/'s Prometheus alert rules and Grafana dashboard.

  check-monitoring.py SOURCE_ROOT PROMTOOL

- the alert rules: `promtool check rules`, and their unit tests
  (`promtool test rules contrib/prometheus/cuslice-alerts.test.yml`);
- the dashboard: valid JSON, every panel with a datasource and an expression,
  every expression valid PromQL (checked by promtool as a recording rule,
  Grafana's variables replaced by values);
- both: every cuslice_* metric they name is one cusliced exports (the family
  names written in src/daemon/http/http-metrics.c).

Exits 77 (skipped) when promtool is missing.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

root, promtool = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
if not promtool or not os.access(promtool, os.X_OK):
    print("promtool not found (scripts/deps.sh installs it): skipped")
    sys.exit(77)

rules = os.path.join(root, "contrib", "prometheus", "cuslice-alerts.yml")
dashboard = os.path.join(root, "contrib", "grafana", "cuslice-dashboard.json")
source = os.path.join(root, "src", "daemon", "http", "http-metrics.c")
failures = []


def run(args, cwd=None):
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append("%s failed:\n%s%s" % (" ".join(args), r.stdout, r.stderr))
    return r.returncode == 0


run([promtool, "check", "rules", rules])
run([promtool, "test", "rules", "cuslice-alerts.test.yml"], cwd=os.path.dirname(rules))

# The families cusliced exports: every "cuslice_..." string of the renderer.
exported = set(re.findall(r'"(cuslice_[a-z_]+)', open(source).read()))
# Names a PromQL expression may carry besides the families (none derived).
def names_in(expr):
    return set(re.findall(r"\bcuslice_[a-z_]+\b", expr))


with open(dashboard) as f:
    dash = json.load(f)
exprs = []
for p in dash.get("panels", []):
    title = p.get("title", "?")
    if not p.get("datasource") or not p.get("targets"):
        failures.append("panel %r: no datasource or no targets" % title)
    for t in p.get("targets", []):
        e = t.get("expr", "")
        if not e:
            failures.append("panel %r: a target without expr" % title)
        exprs.append((title, e))
for v in dash.get("templating", {}).get("list", []):
    q = v.get("definition")
    if q:
        exprs.append(("variable " + v["name"], q))

# Grafana's variables become values promtool can parse.
subst = {"$__rate_interval": "5m", "$__range": "1h", "$__interval": "1m",
         "$Hostname": ".*", "$group": ".*"}
lines = ["groups:", "  - name: dashboard", "    rules:"]
for i, (title, e) in enumerate(exprs):
    if e.startswith("label_values("):
        m = re.match(r"label_values\((\w+),\s*(\w+)\)$", e)
        if not m:
            failures.append("%s: %r is not label_values(METRIC, LABEL)" % (title, e))
            continue
        e = m.group(1)
    for k, v in subst.items():
        e = e.replace(k, v)
    if "$" in e:
        failures.append("%s: unknown variable in %r" % (title, e))
    lines.append("      - record: dashboard:expr%d" % i)
    lines.append("        expr: %s" % json.dumps(e))
with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
    f.write("\n".join(lines) + "\n")
    tmp = f.name
run([promtool, "check", "rules", tmp])
os.unlink(tmp)

used = set()
for _, e in exprs:
    used |= names_in(e)
used |= names_in(open(rules).read())
for n in sorted(used - exported):
    failures.append("%s is named by contrib/ but cusliced exports no such family" % n)
if len(exprs) < 10:
    failures.append("the dashboard has %d expressions; expected its panels" % len(exprs))

for f in failures:
    print("FAIL:", f)
print("%d dashboard expressions, %d metric names checked" % (len(exprs), len(used)))
sys.exit(1 if failures else 0)
