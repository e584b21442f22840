//! The deployment files, checked by the tools clusters use, offline: the Helm chart linted and
//! rendered by Helm's own code (helm-python-sdk) and every rendered object validated strictly
//! against the Kubernetes API's schemas (kubernetes-validate), the DaemonSet's least privilege
//! read from the rendering, the alert rules by promtool; the Slurm unit by `systemd-analyze
//! verify` and the scrape config, with its file SD, by `promtool check config`. SYS_PTRACE, which
//! the Python stacks of jobs gpulse did not start take, is in neither unless asked for: the
//! chart's `stacks.ptrace` and the unit's drop-in `gpulse-serve-stacks.conf` add it and nothing
//! else (`systemd-analyze security --offline` reads the unit with and without the drop-in).
//! `GPULSE_REQUIRE_HELM` (CI) turns a missing tool into a failure; `GPULSE_HELM_PYTHON` names
//! the Python that has the two packages (`.ci/run` makes a venv for them).

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use super::serve::have_prometheus;
use super::support::{fresh_dir, root, run, skipped};

fn required() -> bool {
    std::env::var_os("GPULSE_REQUIRE_HELM").is_some()
}

/// The Python that imports Helm's SDK and the schemas, or `None` (skipped, or failed under
/// `GPULSE_REQUIRE_HELM`).
fn helm_python() -> Option<String> {
    let python = std::env::var("GPULSE_HELM_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = Command::new(&python)
        .args(["-c", "import helm_python, kubernetes_validate, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    assert!(!required(), "{python} cannot import helm_python and kubernetes_validate (GPULSE_HELM_PYTHON)");
    skipped("the Helm chart (no helm-python-sdk and kubernetes-validate; CI installs them)");
    None
}

fn rendered(out: &std::path::Path, name: &str) -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(out.join(format!("{name}.json"))).unwrap()).unwrap()
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"] == kind)
}

/// The chart linted and rendered (default values, the operator's objects, SYS_PTRACE for the
/// stacks) into a fresh folder `name`, every object valid; with what the check printed. `None`
/// where Helm's SDK is missing (skipped).
fn render_chart(name: &str) -> Option<(super::support::Temp, String)> {
    let python = helm_python()?;
    let out = fresh_dir("deploy", name);
    let (code, stdout, stderr) = run(Command::new(&python)
        .arg(root().join("tests/deploy/check_chart.py"))
        .arg(root().join("deploy/helm/gpulse"))
        .arg(&out));
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout.matches(": valid (strict, v").count(), 9, "3 objects, 3 renderings: {stdout}");
    Some((out, stdout))
}

/// The DaemonSet's one container.
fn container(docs: &[Value]) -> &Value {
    &kind(docs, "DaemonSet").expect("a DaemonSet")["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn the_helm_chart_lints_renders_valid_objects_and_asks_the_least_privilege() {
    let Some((out, _)) = render_chart("helm") else { return };

    let default = rendered(&out, "default");
    assert!(kind(&default, "ServiceMonitor").is_none() && kind(&default, "PrometheusRule").is_none());
    let ds = kind(&default, "DaemonSet").expect("a DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"], true, "the host's PIDs, as NVML names them");
    assert_eq!(pod["automountServiceAccountToken"], false, "no API server, no RBAC");
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"], serde_json::json!({"drop": ["ALL"]}), "none added");
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    for what in ["requests", "limits"] {
        assert!(c["resources"][what]["cpu"].is_string() && c["resources"][what]["memory"].is_string(), "{what}");
    }
    // The sockets and the token are mounted read-only, from where the node has them.
    let volume = |name: &str| pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == name).unwrap();
    let mount = |name: &str| c["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap();
    assert_eq!(volume("pod-resources")["hostPath"]["path"], "/var/lib/kubelet/pod-resources");
    for name in ["pod-resources", "token"] {
        assert_eq!(mount(name)["readOnly"], true, "{name}");
    }
    // The CRI socket can start privileged containers, whatever `readOnly` says: not by default.
    assert!(pod["volumes"].as_array().unwrap().iter().all(|v| v["name"] != "cri-socket"), "no CRI socket by default");
    let secret = kind(&default, "Secret").expect("the token's Secret");
    assert_eq!(volume("token")["secret"]["secretName"], secret["metadata"]["name"]);
    assert_eq!(volume("token")["secret"]["defaultMode"], 0o400, "gpulse refuses a token others may read");
    // The token reaches gpulse as a file: never an argument, never a variable.
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--token-file=/etc/gpulse/token/token"), "{args:?}");
    assert_eq!(mount("token")["mountPath"], "/etc/gpulse/token");
    let token_b64 = secret["data"]["token"].as_str().unwrap();
    let everything = serde_json::to_string(&[&c["args"], &c["env"], &c["command"]]).unwrap();
    assert!(!everything.contains(token_b64) && !everything.to_lowercase().contains("gpulse_token"), "{everything}");
    let env = c["env"].as_array().unwrap();
    let var = |n: &str| env.iter().find(|e| e["name"] == n).map(|e| e["value"].clone());
    assert_eq!(var("GPULSE_POD_RESOURCES_SOCKET"), Some("/var/lib/kubelet/pod-resources/kubelet.sock".into()));
    assert_eq!(var("GPULSE_CRI_SOCKET"), None);
    let service = kind(&default, "Service").expect("a Service");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");

    let operator = rendered(&out, "operator");
    // Asked for, the CRI socket is mounted from where the node has it, and gpulse told where.
    let pod = &kind(&operator, "DaemonSet").expect("a DaemonSet")["spec"]["template"]["spec"];
    let cri = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "cri-socket").expect("the CRI socket");
    assert_eq!(cri["hostPath"], serde_json::json!({"path": "/run/containerd/containerd.sock", "type": "Socket"}));
    let c = &pod["containers"][0];
    let env = c["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "GPULSE_CRI_SOCKET" && e["value"] == "/run/containerd/containerd.sock"));
    let monitor = kind(&operator, "ServiceMonitor").expect("a ServiceMonitor under serviceMonitor.enabled");
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true, "the pod labels are gpulse's");
    assert_eq!(monitor["spec"]["endpoints"][0]["authorization"]["credentials"]["key"], "token");
    assert_eq!(monitor["spec"]["selector"]["matchLabels"], ds["spec"]["selector"]["matchLabels"]);
    // The chart's rules are the documented ones, and promtool takes the rendered group.
    let chart_rules = std::fs::read_to_string(root().join("deploy/helm/gpulse/files/alerts.yml")).unwrap();
    let doc_rules = std::fs::read_to_string(root().join("docs/cluster/alerts.yml")).unwrap();
    assert_eq!(chart_rules, doc_rules, "deploy/helm/gpulse/files/alerts.yml is docs/cluster/alerts.yml");
    let rule = kind(&operator, "PrometheusRule").expect("a PrometheusRule under prometheusRule.enabled");
    let rules_file = out.join("rules.json");
    std::fs::write(&rules_file, serde_json::to_string(&rule["spec"]).unwrap()).unwrap();
    if have_prometheus("the chart's rules under promtool") {
        let (code, o, e) = run(Command::new("promtool").args(["check", "rules"]).arg(&rules_file));
        assert_eq!(code, 0, "{o}{e}");
        assert!(o.contains("SUCCESS: 4 rules found"), "{o}");
    }
}

#[test]
fn the_chart_adds_sys_ptrace_for_the_stacks_only_when_asked_and_still_drops_all() {
    let Some((out, printed)) = render_chart("helm-stacks") else { return };
    for rendering in ["default", "stacks"] {
        assert!(printed.contains(&format!("schema {rendering}: DaemonSet gpulse: valid (strict, v")), "{printed}");
    }
    // By default: every capability dropped, none added (SYS_PTRACE reads any process's memory).
    let default = rendered(&out, "default");
    let sc = &container(&default)["securityContext"];
    assert_eq!(sc["capabilities"], serde_json::json!({"drop": ["ALL"]}), "no SYS_PTRACE by default");
    assert!(!serde_json::to_string(&default).unwrap().contains("PTRACE"), "SYS_PTRACE nowhere by default");
    // stacks.ptrace: SYS_PTRACE exactly, `drop: [ALL]` kept, the rest of the hardening as it was.
    let stacks = rendered(&out, "stacks");
    let sc = &container(&stacks)["securityContext"];
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]), "ALL still dropped");
    assert_eq!(sc["capabilities"]["add"], serde_json::json!(["SYS_PTRACE"]), "SYS_PTRACE and nothing else");
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    // The DaemonSet differs from the default one in that one field alone.
    let mut with = kind(&stacks, "DaemonSet").unwrap().clone();
    let caps = &mut with["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"];
    caps.as_object_mut().unwrap().remove("add");
    assert_eq!(&with, kind(&default, "DaemonSet").unwrap(), "stacks.ptrace changes nothing but capabilities.add");
    // The value is documented where it is set, with what it grants.
    let values = std::fs::read_to_string(root().join("deploy/helm/gpulse/values.yaml")).unwrap();
    assert!(values.contains("stacks:\n  ptrace: false\n"), "off by default in values.yaml");
    assert!(values.contains("memory of any process on the node"), "values.yaml says what SYS_PTRACE grants");
}

#[test]
fn the_slurm_unit_verifies_and_the_scrape_config_with_its_file_sd_checks() {
    let dir = fresh_dir("deploy", "slurm");
    let slurm = root().join("deploy/slurm");
    if Command::new("systemd-analyze").arg("--version").output().is_ok() {
        // The unit as installed, but for where gpulse is: this build's binary.
        let unit = std::fs::read_to_string(slurm.join("gpulse-serve.service")).unwrap();
        assert!(unit.contains("ExecStart=/usr/local/bin/gpulse serve"));
        for needed in ["ProtectSystem=strict", "NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectHome="] {
            assert!(unit.contains(needed), "{needed}");
        }
        let bin = super::support::gpulse_bin();
        let unit = unit.replace("/usr/local/bin/gpulse", bin.to_str().unwrap());
        let path = dir.join("gpulse-serve.service");
        std::fs::write(&path, unit).unwrap();
        let (code, o, e) = run(Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path));
        assert_eq!(code, 0, "{o}{e}");
        assert!(!e.contains("gpulse-serve.service:"), "systemd finds fault with the unit: {e}");
    } else {
        assert!(!required(), "systemd-analyze is required");
        skipped("the Slurm unit (no systemd-analyze)");
    }
    if !have_prometheus("the Slurm scrape config under promtool") {
        return;
    }
    // Where Prometheus would have them: the rules beside the config, the SD file in its folder.
    let sd = dir.join("file_sd");
    std::fs::create_dir_all(&sd).unwrap();
    std::fs::copy(slurm.join("prometheus-file-sd.yml"), sd.join("gpulse-slurm.yml")).unwrap();
    std::fs::copy(root().join("docs/cluster/alerts.yml"), dir.join("gpulse-alerts.yml")).unwrap();
    let config = std::fs::read_to_string(slurm.join("prometheus-scrape.yml")).unwrap();
    assert!(config.contains("/etc/prometheus/file_sd/gpulse-*.yml"));
    let config = config.replace("/etc/prometheus/file_sd", sd.to_str().unwrap());
    let config_path: PathBuf = dir.join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let (code, o, e) = run(Command::new("promtool").args(["check", "config"]).arg(&config_path));
    assert_eq!(code, 0, "{o}{e}");
    // promtool also parses every file the SD glob matches, and fails on one it cannot read.
    assert!(format!("{o}{e}").contains("SUCCESS: 1 rule files found"), "{o}{e}");
}

/// `systemd-analyze security --offline` of `unit`: each check's JSON field, whether the unit
/// passes it and its exposure.
fn security_checks(unit: &std::path::Path) -> std::collections::BTreeMap<String, Value> {
    let (code, o, e) = run(Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--json=short", "--no-pager"])
        .arg(unit));
    assert_eq!(code, 0, "{o}{e}");
    let checks: Vec<Value> = serde_json::from_str(&o).unwrap_or_else(|err| panic!("{err}: {o}"));
    checks.into_iter().map(|c| (c["json_field"].as_str().unwrap().to_owned(), c.clone())).collect()
}

#[test]
fn the_slurm_stacks_drop_in_verifies_and_gives_back_cap_sys_ptrace_alone() {
    let slurm = root().join("deploy/slurm");
    let unit = std::fs::read_to_string(slurm.join("gpulse-serve.service")).unwrap();
    let drop_in = std::fs::read_to_string(slurm.join("gpulse-serve-stacks.conf")).unwrap();
    // The unit drops CAP_SYS_PTRACE; the drop-in is one line that gives it back, and only it.
    let bounding: Vec<&str> = unit.lines().filter(|l| l.starts_with("CapabilityBoundingSet=")).collect();
    assert_eq!(bounding, ["CapabilityBoundingSet=CAP_SYSLOG"]);
    assert!(unit.contains("gpulse-serve-stacks.conf"), "the unit points to the drop-in");
    let settings: Vec<&str> = drop_in.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    assert_eq!(settings, ["[Service]", "CapabilityBoundingSet=CAP_SYS_PTRACE"]);
    assert!(drop_in.contains("/etc/systemd/system/gpulse-serve.service.d/stacks.conf"));
    assert!(drop_in.contains("secrets in memory"), "the drop-in says what CAP_SYS_PTRACE grants");
    let Ok(version) = Command::new("systemd-analyze").arg("--version").output() else {
        assert!(!required(), "systemd-analyze is required");
        skipped("the Slurm unit's stacks drop-in (no systemd-analyze)");
        return;
    };
    // Installed as systemd reads drop-ins: NAME.service.d/ beside the unit.
    let bin = super::support::gpulse_bin();
    let unit = unit.replace("/usr/local/bin/gpulse", bin.to_str().unwrap());
    let (plain, with) = (fresh_dir("deploy", "slurm-plain"), fresh_dir("deploy", "slurm-stacks"));
    for dir in [&plain, &with] {
        std::fs::write(dir.join("gpulse-serve.service"), &unit).unwrap();
    }
    std::fs::create_dir_all(with.join("gpulse-serve.service.d")).unwrap();
    std::fs::write(with.join("gpulse-serve.service.d/stacks.conf"), &drop_in).unwrap();
    let path = with.join("gpulse-serve.service");
    let (code, o, e) = run(Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&path));
    assert_eq!(code, 0, "{o}{e}");
    for file in ["gpulse-serve.service:", "stacks.conf:"] {
        assert!(!e.contains(file), "systemd finds fault with {file} {e}");
    }
    // systemd's own reading of the unit, with and without: CAP_SYS_PTRACE differs, nothing else
    // (a check's `set`, or its exposure where a setting is weakened without failing it).
    // (`security --offline` came with systemd 250.)
    let version = String::from_utf8_lossy(&version.stdout);
    let major: u32 = version.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    if major < 250 {
        assert!(!required(), "systemd-analyze security --offline (systemd 250) is required: {version}");
        skipped("the Slurm unit's capabilities under systemd-analyze security (systemd before 250)");
        return;
    }
    let (before, after) = (security_checks(&plain.join("gpulse-serve.service")), security_checks(&path));
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>());
    let changed: Vec<&String> = before.iter().filter(|(k, v)| after[*k] != **v).map(|(k, _)| k).collect();
    assert_eq!(changed, ["CapabilityBoundingSet_CAP_SYS_PTRACE"], "only CAP_SYS_PTRACE comes back");
    let ptrace = |checks: &std::collections::BTreeMap<String, Value>| {
        checks["CapabilityBoundingSet_CAP_SYS_PTRACE"]["set"].clone()
    };
    assert_eq!((ptrace(&before), ptrace(&after)), (Value::Bool(true), Value::Bool(false)), "dropped, then kept");
    assert_eq!(
        (&before["NoNewPrivileges"]["set"], &after["NoNewPrivileges"]["set"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
}
