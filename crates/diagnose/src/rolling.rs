//! A run as it happens: a rolling diagnosis over the last minutes, and the findings worth writing
//! down as they appear (a memory forecast, before the OOM it forecasts), each GPU's on its own.
//! Times are the samples' own, so a recording replays through it as it ran.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gpulse_model::{DeviceInfo, Event, Marker, Metric, Poll, RunData};

use crate::{Finding, FindingId, Run, Steps};

/// How much of the run the live diagnosis reads.
const WINDOW_US: i64 = 10 * 60 * 1_000_000;
/// How often it runs, at the most.
const DIAGNOSE_EVERY_US: i64 = 5_000_000;
/// A diagnosis of the window costs about 0.25 µs of a core per stack sample in it (a release
/// build, `benches/rolling.rs`): one every 100 times that keeps it within 1 % of a core. Eight
/// ranks' ten minutes (main threads at 50 Hz, six workers each at 10 Hz) are diagnosed every
/// 13 s rather than every 5; one process's, every 5.
const DIAGNOSE_US_PER_SAMPLE: i64 = 25;
/// Start-up (CUDA context, model build, cuDNN autotuning, the first batches) looks like every
/// problem at once; findings are held back this long.
const WARM_UP_US: i64 = 30_000_000;
/// Steps per second and the data wait shown are over this much of the latest marks.
const RECENT_STEPS_US: i64 = 30 * 1_000_000;
/// Memory trend is the slope over this much of the latest samples.
const TREND_US: i64 = 30 * 1_000_000;

/// How far past the window its oldest samples may be kept between diagnoses.
const TRIM_SLACK_US: i64 = 30 * 1_000_000;

/// Times are the samples' own, so a recording replays through it as it ran.
/// Of a whole machine, a process unsampled this long (µs) is forgotten.
const GONE_AFTER_US: i64 = 300_000_000;

pub struct RollingDiagnosis {
    started_us: Option<i64>,
    now_us: i64,
    window: RunData,
    last_diagnosis_us: Option<i64>,
    leading: Option<Finding>,
    /// Every finding of the latest diagnosis.
    current: Vec<Finding>,
    /// (finding id, GPU) → the time-to-OOM last written for it (`None` when it had none).
    written: HashMap<(FindingId, Option<u32>), Option<f64>>,
    run: Option<Run>,
    /// Where the window's wall time went, as of the latest diagnosis.
    ledger: Option<crate::Ledger>,
    /// Each GPU's distance from its roof, as of the latest diagnosis.
    efficiency: Vec<crate::Efficiency>,
    /// Set for a view of the whole machine ([`RollingDiagnosis::following_workloads`]).
    workloads: Option<Workloads>,
    /// GPUs whose oldest samples the window has dropped: their first sample's held readings
    /// (the energy counter's) were read before the window began.
    trimmed: BTreeSet<u32>,
    /// The job's main threads: seconds in each state since the start, and what each does now.
    main_thread: crate::main_thread::Totals,
    /// Kept across diagnoses: the window's stacks keep their ids, so each stack and state is
    /// classified once in the run, not once per diagnosis.
    classifier: std::sync::Arc<std::sync::Mutex<crate::main_thread::Classifier>>,
}

/// Drops what in `window` is older than [`WINDOW_US`] at `now_us`; returns the GPUs whose
/// snapshots it dropped.
fn trim_window(window: &mut RunData, now_us: i64) -> BTreeSet<u32> {
    let keep = |t_us: i64| now_us - t_us <= WINDOW_US;
    let mut dropped = BTreeSet::new();
    window.snapshots.retain(|s| {
        let kept = keep(s.timestamp_us);
        if !kept {
            dropped.extend(s.gpus.iter().map(|g| g.gpu_index));
        }
        kept
    });
    window.host.retain(|h| keep(h.timestamp_us));
    window.trees.retain(|t| keep(t.timestamp_us));
    window.events.retain(|e| keep(e.t_ms * 1000));
    window.markers.retain(|m| keep(m.t_us));
    window.stacks.samples.retain(|x| keep(x.t_us));
    dropped
}

/// What each GPU runs, for a view of the whole machine, where one job follows another: when a
/// GPU's processes are replaced by others (or by none, or none by some), what came before on it
/// describes another job, so its samples are dropped and it sits out the diagnosis for a
/// warm-up, as a job's own diagnosis waits from its start. A process the diagnosis found idle
/// (a forgotten kernel holding memory) is not part of any job, and does not count.
#[derive(Debug, Default)]
struct Workloads {
    /// GPU → the PIDs on it as last listed.
    pids: HashMap<u32, BTreeSet<u32>>,
    /// (GPU, PID) of the processes found idle → the memory they held then, bytes. Known for as
    /// long as they stay listed, idle and at that size: a GPU's start again clears its findings,
    /// and a busy job beside a holder whose SM use NVML cannot give hides it from the rule, but
    /// neither makes it work.
    idle: BTreeMap<(u32, u32), Option<u64>>,
    /// GPU → when its current workload began.
    since_us: HashMap<u32, i64>,
}

impl RollingDiagnosis {
    /// `instrumented`: the job runs under `--instrument`, so every DataLoader wait is marked.
    pub fn new(devices: &[DeviceInfo], instrumented: bool) -> Self {
        let mut window = RunData { devices: devices.to_vec(), ..RunData::default() };
        if instrumented {
            window.meta.insert(gpulse_model::MetaKey::Instrumented.as_str().into(), "true".into());
        }
        Self {
            started_us: None,
            now_us: 0,
            window,
            last_diagnosis_us: None,
            leading: None,
            current: Vec::new(),
            written: HashMap::new(),
            run: None,
            ledger: None,
            efficiency: Vec::new(),
            workloads: None,
            trimmed: BTreeSet::new(),
            main_thread: crate::main_thread::Totals::default(),
            classifier: Default::default(),
        }
    }

    /// For a view of the whole machine (`top`, `serve` without a job): each GPU's diagnosis
    /// starts again when another workload takes it.
    pub fn following_workloads(mut self) -> Self {
        self.workloads = Some(Workloads::default());
        self
    }

    /// Notes each GPU's processes; a GPU whose PIDs share none with its last list starts again.
    fn follow(&mut self, poll: &Poll) {
        let (Some(w), Some(snap)) = (self.workloads.as_mut(), &poll.snapshot) else { return };
        let now = poll.host.timestamp_us;
        for g in &snap.gpus {
            if g.absence(Metric::Processes).is_some() {
                continue;
            }
            let pids: BTreeSet<u32> = g.processes.iter().map(|p| p.pid).collect();
            // A holder that left, works, or changed size is no longer known idle.
            w.idle.retain(|&(on, pid), held| {
                on != g.gpu_index
                    || g.processes.iter().find(|p| p.pid == pid).is_some_and(|p| {
                        let moved = match (*held, p.used_memory_bytes) {
                            (Some(a), Some(b)) => a.abs_diff(b) as f64 > 0.02 * a as f64,
                            _ => false,
                        };
                        p.sm_util_pct.is_none_or(|s| s <= 1) && !moved
                    })
            });
            let Some(before) = w.pids.insert(g.gpu_index, pids.clone()) else { continue };
            // Both sides without the idle holders: a job that follows another beside one.
            let working = |set: &BTreeSet<u32>| -> BTreeSet<u32> {
                set.iter().copied().filter(|&p| !w.idle.contains_key(&(g.gpu_index, p))).collect()
            };
            let (before, pids) = (working(&before), working(&pids));
            if before.is_disjoint(&pids) && before != pids {
                w.since_us.insert(g.gpu_index, now);
                let gpu = g.gpu_index;
                self.trimmed.insert(gpu);
                for s in &mut self.window.snapshots {
                    s.gpus.retain(|x| x.gpu_index != gpu);
                }
                self.written.retain(|(_, on), _| *on != Some(gpu));
                self.current.retain(|f| f.gpu != Some(gpu));
                self.leading = lead(&self.current);
            }
        }
    }

    /// Whether `gpu`'s current workload began less than a warm-up ago.
    fn warming_up(&self, gpu: Option<u32>) -> bool {
        let since = self.workloads.as_ref().zip(gpu).and_then(|(w, g)| w.since_us.get(&g));
        since.is_some_and(|t| self.now_us - t < WARM_UP_US)
    }

    pub fn push_poll(&mut self, poll: Poll) {
        let now = poll.host.timestamp_us;
        self.follow(&poll);
        self.window.snapshots.extend(poll.snapshot);
        self.window.host.push(poll.host);
        self.window.trees.extend(poll.tree);
        self.started_us.get_or_insert(now);
        self.now_us = now;
        // What fell out of the window is dropped before each diagnosis; between them, only
        // once it is a slack's worth, so that a poll costs no pass over the window.
        // The host is read every poll: its oldest sample dates the window.
        if self.window.host.first().is_some_and(|h| now - h.timestamp_us > WINDOW_US + TRIM_SLACK_US) {
            self.trim();
        }
    }

    /// Drops what is older than the window.
    fn trim(&mut self) {
        let dropped = trim_window(&mut self.window, self.now_us);
        self.trimmed.extend(dropped);
    }

    pub fn push_markers(&mut self, marks: &[Marker]) {
        self.window.markers.extend_from_slice(marks);
    }

    /// The job's Python threads: their frames are kept for the run, their samples for the window.
    pub fn push_stacks(&mut self, mut batch: gpulse_model::StackBatch) {
        let samples = std::mem::take(&mut batch.samples);
        self.window.stacks.add(batch);
        self.main_thread.add(&self.window.stacks, &samples);
        self.window.stacks.samples.extend(samples);
        // Of a whole machine, a process gone for a while is forgotten: its series end, and the
        // count of them stays that of the processes that run.
        if self.workloads.is_some() {
            self.main_thread.forget_quiet(GONE_AFTER_US);
        }
    }

    /// Whether it is a view of the whole machine ([`RollingDiagnosis::following_workloads`]).
    pub fn is_whole_machine(&self) -> bool {
        self.workloads.is_some()
    }

    /// The job's main threads since the run began: seconds per state, and each one's latest.
    pub fn main_thread(&self) -> &crate::main_thread::Totals {
        &self.main_thread
    }

    pub fn push_event(&mut self, e: &Event) {
        self.window.events.push(e.clone());
    }

    /// How often the window is diagnosed: every 5 s, or less often where its stack samples would
    /// make that more than a hundredth of a core.
    fn every_us(&self) -> i64 {
        let samples = i64::try_from(self.window.stacks.samples.len()).unwrap_or(i64::MAX);
        DIAGNOSE_EVERY_US.max(samples.saturating_mul(DIAGNOSE_US_PER_SAMPLE))
    }

    /// Diagnoses when due; returns the findings to write down: those not seen before, and a
    /// memory forecast that moved by a quarter or more.
    pub fn update(&mut self) -> Vec<Finding> {
        let Some(started) = self.started_us else { return Vec::new() };
        if self.now_us - started < WARM_UP_US
            || self.last_diagnosis_us.is_some_and(|t| self.now_us - t < self.every_us())
        {
            return Vec::new();
        }
        self.last_diagnosis_us = Some(self.now_us);
        self.trim();
        let mut run = Run::from_recording(&self.window);
        crate::main_thread::classifier::share(&run, &self.classifier);
        // A GPU whose job has just started sits out: a start looks like every problem at once,
        // on the GPU's own findings and on the machine's (imbalance, health).
        run.gpus.retain(|g| !self.warming_up(Some(g.gpu)));
        for g in &mut run.gpus {
            g.energy_first_held = self.trimmed.contains(&g.gpu);
        }
        let (findings, ledger) = crate::diagnose_with_ledger(&run);
        self.ledger = Some(ledger);
        self.efficiency = crate::efficiency(&run);
        // The holders this diagnosis found, at the size they hold now.
        if let Some(w) = self.workloads.as_mut() {
            let latest = self.window.snapshots.last();
            for (gpu, pid) in idle_of(&findings) {
                let held = latest
                    .and_then(|s| s.gpus.iter().find(|g| g.gpu_index == gpu))
                    .and_then(|g| g.processes.iter().find(|p| p.pid == pid))
                    .and_then(|p| p.used_memory_bytes);
                w.idle.entry((gpu, pid)).or_insert(held);
            }
        }
        self.run = Some(run);
        let fresh = self.worth_writing(&findings);
        self.leading = lead(&findings);
        self.current = findings;
        fresh
    }

    /// The findings not written before, each GPU's on its own, and memory forecasts that moved by
    /// a quarter or more.
    fn worth_writing(&mut self, findings: &[Finding]) -> Vec<Finding> {
        let mut fresh = Vec::new();
        for f in findings {
            let oom_s = f.time_to_oom_s;
            let key = (f.id, f.gpu);
            let new = match self.written.get(&key) {
                None => true,
                Some(before) => match (before, oom_s) {
                    (Some(b), Some(now)) => (now - b).abs() >= 0.25 * b.abs().max(1.0),
                    (None, Some(_)) => true,
                    _ => false,
                },
            };
            if new {
                self.written.insert(key, oom_s);
                fresh.push(f.clone());
            }
        }
        fresh
    }

    /// The findings for the window as it stands, whether or not one is due: at the end of a run,
    /// what `diagnose` would say of its recording (for a run shorter than the window).
    pub fn findings_now(&self) -> Vec<Finding> {
        let mut window = self.window.clone();
        trim_window(&mut window, self.now_us);
        crate::diagnose_run(&Run::from_recording(&window))
    }

    /// Where the window's wall time went, as of the latest diagnosis.
    /// Each GPU's distance from its roof over the window, as of the latest diagnosis (the same
    /// run its findings rest on).
    pub fn efficiency(&self) -> &[crate::Efficiency] {
        &self.efficiency
    }

    pub fn ledger(&self) -> Option<&crate::Ledger> {
        self.ledger.as_ref()
    }

    /// The rolling window of the run so far (the last ten minutes).
    pub fn window(&self) -> &RunData {
        &self.window
    }

    /// Whether the window has been diagnosed yet (its warm-up is over): an empty
    /// [`RollingDiagnosis::current`] is then a finding of nothing, not a wait.
    pub fn diagnosed(&self) -> bool {
        self.last_diagnosis_us.is_some()
    }

    /// Every finding of the latest diagnosis, worst first: what holds now, not only what is new.
    pub fn current(&self) -> &[Finding] {
        &self.current
    }

    /// (GPU, PID) of the processes that hold memory and do nothing. Of a whole machine, a holder
    /// found before stays known while a new job on its GPU warms up.
    pub fn idle_processes(&self) -> BTreeSet<(u32, u32)> {
        match &self.workloads {
            Some(w) => w.idle.keys().copied().collect(),
            None => idle_of(&self.current),
        }
    }

    /// The latest finding worth leading with, if any: what costs the most now. A slow start is
    /// over once the loop runs, so it leads only when nothing else was found.
    pub fn leading(&self) -> Option<&Finding> {
        self.leading.as_ref()
    }

    /// The loop's pace over its latest marks.
    pub fn recent_steps(&self) -> Option<Steps> {
        let recent: Vec<Marker> =
            self.window.markers.iter().filter(|m| self.now_us - m.t_us <= RECENT_STEPS_US).cloned().collect();
        let instrumented = self.window.meta.contains_key(gpulse_model::MetaKey::Instrumented.as_str());
        Steps::from_markers(&recent, self.now_us, instrumented)
    }

    /// Memory's trend over the latest [`TREND_US`], GiB a minute: the median of the slopes
    /// between pairs of samples (Theil–Sen), which one step such as a start-up climb cannot move,
    /// and none where the latest third of the window does not share it (a climb that stopped).
    pub fn memory_trend_gib_per_min(&self, gpu: u32) -> Option<f64> {
        let last = self.window.snapshots.last()?.timestamp_us;
        let pts: Vec<(f64, f64)> = self
            .window
            .snapshots
            .iter()
            .filter(|s| last - s.timestamp_us <= TREND_US)
            .filter_map(|s| {
                let g = s.gpus.iter().find(|g| g.gpu_index == gpu)?;
                Some(((s.timestamp_us - last) as f64 / 60e6, g.memory_used_gib()?))
            })
            .collect();
        if pts.len() < 5 {
            return None;
        }
        let slope = median_slope(&pts)?;
        let third = TREND_US as f64 / 3.0 / 60e6;
        let recent: Vec<(f64, f64)> = pts.iter().copied().filter(|p| p.0 >= -third).collect();
        match median_slope(&recent) {
            Some(r) if recent.len() >= 3 && (r.signum() != slope.signum() || r.abs() < slope.abs() / 3.0) => Some(0.0),
            _ => Some(slope),
        }
    }
}

/// The median of the slopes between every pair of points, over at most 120 of them evenly
/// spaced, so a 20 ms interval costs no more than a 250 ms one.
fn median_slope(pts: &[(f64, f64)]) -> Option<f64> {
    let stride = pts.len().div_ceil(120).max(1);
    let pts: Vec<&(f64, f64)> = pts.iter().step_by(stride).collect();
    let mut slopes = Vec::with_capacity(pts.len() * pts.len() / 2);
    for (i, a) in pts.iter().enumerate() {
        for b in &pts[i + 1..] {
            if b.0 > a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let mid = slopes.len() / 2;
    Some(*slopes.select_nth_unstable_by(mid, f64::total_cmp).1)
}

/// (GPU, PID) of the `idle_holder` findings.
fn idle_of(findings: &[Finding]) -> BTreeSet<(u32, u32)> {
    findings.iter().filter(|f| f.id == FindingId::IdleHolder).filter_map(|f| Some((f.gpu?, f.facts.pid?))).collect()
}

/// What leads: [`leading_of`], and a clean bill of health only when nothing else was found, and
/// then every time.
fn lead(findings: &[Finding]) -> Option<Finding> {
    leading_of(findings).or(findings.first()).cloned()
}

/// The first finding (they come worst first) that is not `healthy`, preferring any that is still
/// costing the run to `startup`.
fn leading_of(findings: &[Finding]) -> Option<&Finding> {
    let ill = || findings.iter().filter(|f| f.id.names_something());
    ill().find(|f| f.id != FindingId::Startup).or_else(|| ill().next())
}

#[cfg(test)]
#[path = "rolling_tests.rs"]
mod tests;
