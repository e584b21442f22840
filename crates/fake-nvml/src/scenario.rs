//! The scenario file that drives the stand-in library: devices, their values over time,
//! processes, failing calls and lost GPUs.
//!
//! The file is JSON, named by `GPULSE_FAKE_NVML_SCENARIO`. A device's `timeline` is a list of
//! points; the state at time `t` is every point with `t_s <= t` merged in order, so a point only
//! names what changes. A value no point ever names is `NVML_ERROR_NOT_SUPPORTED`. A device may
//! instead (or as well) replay a real trace in the `gpm_<scenario>.csv` format.

use std::collections::BTreeMap;

use gpulse_model::{GPM_FIELDS, trace};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The whole scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_driver")]
    pub driver_version: String,
    #[serde(default = "default_nvml")]
    pub nvml_version: String,
    /// CUDA driver API version as NVML encodes it (13000 = 13.0).
    #[serde(default = "default_cuda")]
    pub cuda_driver_version: i32,
    /// An NVML return code for `nvmlInit` to fail with (9 = driver not loaded).
    #[serde(default)]
    pub init_error: Option<u32>,
    /// Functions that answer `NVML_ERROR_FUNCTION_NOT_FOUND`, as an older driver's do.
    #[serde(default)]
    pub unsupported_functions: Vec<String>,
    /// Scenario seconds per wall-clock second.
    #[serde(default = "one")]
    pub speed: f64,
    /// Start the clock this many scenario seconds in.
    #[serde(default)]
    pub start_s: f64,
    pub devices: Vec<DeviceSpec>,
}

fn default_driver() -> String {
    "580.159.04".into()
}
fn default_nvml() -> String {
    "13.580.159.04".into()
}
fn default_cuda() -> i32 {
    13000
}
fn one() -> f64 {
    1.0
}

/// One GPU.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    #[serde(default)]
    pub serial: Option<String>,
    /// Static answers of the calls in `extra.rs`, by NVML function name (a number, a string, or
    /// for calls with several outputs a list): `{"nvmlDeviceGetVbiosVersion": "96.00.A5.00.1A",
    /// "nvmlDeviceGetPowerManagementLimitConstraints": [200000, 700000]}`. A call not named
    /// answers `NVML_ERROR_NOT_SUPPORTED`.
    #[serde(default)]
    pub nvml: BTreeMap<String, Value>,
    /// Static facts and starting values, in the same keys as timeline points.
    #[serde(default)]
    pub base: Map<String, Value>,
    #[serde(default)]
    pub timeline: Vec<Map<String, Value>>,
    /// Path of a `gpm_*.csv` trace to replay; relative paths are relative to the scenario file.
    #[serde(default)]
    pub trace: Option<String>,
    /// Which `gpu` column of the trace to replay (default: this device's position).
    #[serde(default)]
    pub trace_gpu: Option<u32>,
    #[serde(default)]
    pub processes: Vec<ProcessSpec>,
    #[serde(default)]
    pub errors: Vec<ErrorSpec>,
    /// From this scenario time on, every call about the device answers `GPU_IS_LOST`.
    #[serde(default)]
    pub lost_at_s: Option<f64>,
    /// Critical Xids the device raises, each at a scenario time, delivered through
    /// `nvmlEventSetWait_v2`. Without the key the device does not support events (registering
    /// answers `NOT_SUPPORTED`); `[]` supports them and raises none.
    #[serde(default)]
    pub xids: Option<Vec<XidSpec>>,
    /// The device's NVLink links, by number. Without the key every link call answers
    /// `NOT_SUPPORTED` (a board without NVLink); a link past the list `INVALID_ARGUMENT`.
    #[serde(default)]
    pub nvlinks: Option<Vec<NvLinkSpec>>,
}

/// An Xid raised at `at_s`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XidSpec {
    pub at_s: f64,
    pub xid: u64,
}

/// One NVLink link: its state, version, far end and error counters (a counter not named answers
/// `NOT_SUPPORTED`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLinkSpec {
    pub active: bool,
    #[serde(default)]
    pub version: Option<u32>,
    #[serde(default)]
    pub remote_pci_bus_id: Option<String>,
    #[serde(default)]
    pub replay: Option<u64>,
    #[serde(default)]
    pub recovery: Option<u64>,
    #[serde(default)]
    pub crc_flit: Option<u64>,
    #[serde(default)]
    pub crc_data: Option<u64>,
}

/// A process holding a context on the GPU for a while.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    /// A number, or `"child"`: the first child of the process that loaded the library (the job
    /// `gpulse run` started), so a real job's samples line up with the stand-in GPU's.
    #[serde(deserialize_with = "pid_or_child")]
    pub pid: u32,
    #[serde(default)]
    pub used_memory_mib: Option<u64>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub sm_util_pct: Option<u32>,
    #[serde(default)]
    pub mem_util_pct: Option<u32>,
    #[serde(default)]
    pub from_s: f64,
    #[serde(default)]
    pub until_s: Option<f64>,
}

/// The pid a scenario writes as `"child"`, resolved when the process list is read.
pub const CHILD_PID: u32 = 0;

fn pid_or_child<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Pid {
        Number(u32),
        Word(String),
    }
    match Pid::deserialize(d)? {
        Pid::Number(0) => Err(serde::de::Error::custom("pid 0 is no process")),
        Pid::Number(n) => Ok(n),
        Pid::Word(w) if w == "child" => Ok(CHILD_PID),
        Pid::Word(w) => Err(serde::de::Error::custom(format!("pid {w:?}: a number or \"child\""))),
    }
}

/// A call that fails with `code` between `from_s` and `until_s`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorSpec {
    pub call: String,
    pub code: u32,
    #[serde(default)]
    pub from_s: f64,
    #[serde(default)]
    pub until_s: Option<f64>,
}

/// The device's state from one time on, with every earlier point merged in.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct State {
    pub util_gpu_pct: Option<u32>,
    pub util_mem_pct: Option<u32>,
    pub memory_total_mib: Option<u64>,
    pub memory_reserved_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    /// Exact byte counts, where MiB are too coarse to reproduce a real device; they win over MiB.
    pub memory_total_bytes: Option<u64>,
    pub memory_reserved_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub temperature_gpu_c: Option<u32>,
    pub temperature_memory_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub enforced_power_limit_w: Option<f64>,
    pub energy_j: Option<f64>,
    pub clock_graphics_mhz: Option<u32>,
    pub clock_sm_mhz: Option<u32>,
    pub clock_mem_mhz: Option<u32>,
    pub clock_max_sm_mhz: Option<u32>,
    pub clock_max_graphics_mhz: Option<u32>,
    pub clock_max_mem_mhz: Option<u32>,
    pub pstate: Option<u32>,
    pub fan_speed_pct: Option<u32>,
    pub clocks_event_reasons: Option<u64>,
    pub clocks_event_reasons_supported: Option<u64>,
    pub pcie_tx_kib_s: Option<u32>,
    pub pcie_rx_kib_s: Option<u32>,
    pub pcie_link_gen: Option<u32>,
    pub pcie_link_width: Option<u32>,
    pub ecc_enabled: Option<bool>,
    pub ecc_uncorrected_volatile: Option<u64>,
    pub ecc_corrected_volatile: Option<u64>,
    pub persistence_mode: Option<bool>,
    pub compute_mode: Option<u32>,
    pub gpm_supported: Option<bool>,
    pub cuda_cc: Option<(i32, i32)>,
    /// GPM metric values by NVML metric id (2 = SM util, …), over the interval ending now.
    #[serde(default)]
    pub gpm: BTreeMap<u32, f64>,
    /// `nvmlDeviceGetFieldValues` answers by NVML field id, or by the key of the model's metric
    /// table (`{"pcie_replay_count": 3}`). A field not named answers `NOT_SUPPORTED`.
    #[serde(default)]
    pub fields: BTreeMap<u32, i64>,
    /// Fields that count up: each grows by this many a second of scenario time, from the
    /// value `fields` names at time 0 (NVLink's traffic counters, say).
    #[serde(default)]
    pub fields_per_s: BTreeMap<u32, i64>,
}

/// A device ready to answer calls: its spec and its states in time order.
#[derive(Debug)]
pub struct Device {
    pub spec: DeviceSpec,
    /// `(from scenario time, state)`, sorted by time.
    pub states: Vec<(f64, State)>,
}

impl Device {
    /// The state at scenario time `t` (the first state before the first point).
    pub fn state(&self, t: f64) -> &State {
        let i = self.states.partition_point(|s| s.0 <= t);
        &self.states[i.saturating_sub(1)].1
    }
}

/// Loads and checks a scenario; `dir` resolves relative trace paths.
pub fn load(text: &str, dir: &std::path::Path) -> Result<(Scenario, Vec<Device>), String> {
    let mut sc: Scenario = serde_json::from_str(text).map_err(|e| format!("bad scenario: {e}"))?;
    let specs = std::mem::take(&mut sc.devices);
    let mut devices = Vec::new();
    for (pos, spec) in specs.into_iter().enumerate() {
        let mut points: Vec<(f64, Map<String, Value>)> = Vec::new();
        for p in &spec.timeline {
            let t = p.get("t_s").and_then(Value::as_f64).ok_or("every timeline point needs t_s")?;
            points.push((t, p.clone()));
        }
        if let Some(path) = &spec.trace {
            let full = dir.join(path);
            let text = std::fs::read_to_string(&full).map_err(|e| format!("{}: {e}", full.display()))?;
            let rows = trace::parse(&text).map_err(|e| format!("{}: {e}", full.display()))?;
            let gpu = spec.trace_gpu.unwrap_or(pos as u32);
            let rows: Vec<_> = rows.into_iter().filter(|r| r.gpu == gpu).collect();
            let t0 = rows.first().map_or(0.0, |r| r.t_s);
            points.extend(rows.iter().map(|r| (r.t_s - t0, trace_point(r))));
        }
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged = spec.base.clone();
        let mut states = vec![(f64::NEG_INFINITY, state_of(&merged)?)];
        for (t, p) in points {
            for (k, v) in p {
                if k == "gpm" || k == "fields" || k == "fields_per_s" {
                    let gpm = merged.entry(k).or_insert_with(|| Value::Object(Map::new()));
                    if let (Value::Object(into), Value::Object(from)) = (gpm, v) {
                        into.extend(from);
                    }
                } else {
                    merged.insert(k, v);
                }
            }
            states.push((t, state_of(&merged)?));
        }
        devices.push(Device { spec, states });
    }
    Ok((sc, devices))
}

fn state_of(m: &Map<String, Value>) -> Result<State, String> {
    let mut m = m.clone();
    m.remove("t_s");
    // GPM metrics may be named by column name or by NVML id.
    if let Some(Value::Object(g)) = m.get_mut("gpm") {
        let named: Vec<(String, Value)> = std::mem::take(g).into_iter().collect();
        for (k, v) in named {
            let id = GPM_FIELDS.iter().find(|f| f.scenario_key == k).map_or(k, |f| f.nvml_id.to_string());
            g.insert(id, v);
        }
    }
    for key in ["fields", "fields_per_s"] {
        if let Some(Value::Object(f)) = m.get_mut(key) {
            let named: Vec<(String, Value)> = std::mem::take(f).into_iter().collect();
            for (k, v) in named {
                let id = gpulse_model::table_metric(&k).and_then(|m| m.nvml_field()).map_or(k, |id| id.to_string());
                f.insert(id, v);
            }
        }
    }
    serde_json::from_value(Value::Object(m)).map_err(|e| format!("bad device state: {e}"))
}

/// A trace row as a timeline point.
fn trace_point(r: &trace::TraceRow) -> Map<String, Value> {
    let mut p = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            p.insert(k.into(), v);
        }
    };
    put("util_gpu_pct", r.util_gpu_pct.map(Value::from));
    put("util_mem_pct", r.util_mem_pct.map(Value::from));
    put("memory_used_mib", r.memory_used_mib.map(Value::from));
    put("temperature_gpu_c", r.temperature_gpu_c.map(Value::from));
    put("power_w", r.power_draw_w.map(Value::from));
    put("clock_sm_mhz", r.clock_sm_mhz.map(Value::from));
    put("clocks_event_reasons", r.clocks_event_reasons.map(Value::from));
    if let Some(g) = &r.gpm {
        let mut gpm = Map::new();
        for f in &GPM_FIELDS {
            if let Some(v) = (f.get)(g) {
                gpm.insert(f.nvml_id.to_string(), Value::from(f.unit.to_nvml(v)));
            }
        }
        p.insert("gpm".into(), Value::Object(gpm));
    }
    p
}
