"""Renders deploy/helm/gpulse with real Helm (helm-python-sdk: Helm's own Go code) and validates
every document against the Kubernetes API's JSON schemas (kubernetes-validate), strictly.

    python check_chart.py CHART OUT_DIR

Lints the chart (strict: warnings fail), renders it with the default values, with the
Prometheus Operator objects on, and with SYS_PTRACE for the Python stacks (`stacks.ptrace`), and
writes each rendering's documents to OUT_DIR/NAME.json for the caller's own checks. The operator's objects (ServiceMonitor, PrometheusRule) have no schema
in the Kubernetes API's set: they are listed as skipped, and the caller checks the rule group
with promtool. Exits non-zero on any finding.
"""

import json
import sys
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import yaml

KUBE = "1.37.0"
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
RENDERINGS = {
    "default": {},
    "operator": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "metricsAuth": True,
        "criSocket": "/run/containerd/containerd.sock",
    },
    # SYS_PTRACE for the Python stacks of jobs gpulse did not start.
    "stacks": {"stacks": {"ptrace": True}},
}


def main() -> int:
    chart, out = Path(sys.argv[1]), Path(sys.argv[2])
    failed = False
    for name, values in RENDERINGS.items():
        report = helm.lint(str(chart), values, strict=True, namespace="monitoring", kube_version=f"v{KUBE}")
        for m in report["messages"]:
            # Severity 1 is information ("icon is recommended"); 2 and 3 fail, as `--strict`.
            print(f"lint {name}: severity {m['severity']}: {m['path']}: {m['error']}")
            failed |= m["severity"] >= 2
        for e in report["errors"]:
            print(f"lint {name}: error: {e}")
            failed = True
        rendered = helm.Chart.load(str(chart)).render(values=values, name="gpulse", namespace="monitoring")
        docs = []
        for path, text in sorted(rendered.items()):
            if path.endswith("NOTES.txt"):
                continue
            for doc in yaml.safe_load_all(text):
                if not doc:
                    continue
                docs.append(doc)
                kind = doc.get("kind")
                if kind in OPERATOR_KINDS:
                    print(f"schema {name}: {kind} skipped: a Prometheus Operator CRD, not in the API's schemas")
                    continue
                try:
                    kubernetes_validate.validate(doc, KUBE, strict=True)
                    print(f"schema {name}: {kind} {doc['metadata']['name']}: valid (strict, v{KUBE})")
                except kubernetes_validate.ValidationError as e:
                    print(f"schema {name}: {kind} {path}: INVALID: {e.message} at {list(e.path)}")
                    failed = True
        (out / f"{name}.json").write_text(json.dumps(docs, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
