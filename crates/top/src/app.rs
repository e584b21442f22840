//! The whole state of the view, apart from drawing: what the latest frame said, the histories,
//! and what the keys changed (sorting, filters, tree, selection, tags, the screen, a pending
//! signal). Keys come in as [`Key`]s, so every behaviour is testable without a terminal.

use std::collections::{BTreeSet, HashMap};

use gpulse_diagnose::RollingDiagnosis;
use gpulse_live::Frame;
use gpulse_model::{DeviceInfo, GIB, Poll};

use crate::fmt::escape_control;
use crate::history::{Chart, GpuHistory, Ring};
use crate::procs::{ProcNow, Signal, Target};
use crate::rows::{self, Column, Filter, Row, Sort};

/// Readings kept for the charts: ten minutes at 1 s.
pub const HISTORY_LEN: usize = 600;

/// A key, as the view reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Esc,
    Backspace,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Home,
    End,
    CtrlC,
}

/// What the loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Send this signal to these processes (confirmed).
    Signal(Signal, Vec<Target>),
    /// Replay: take one poll now (while paused).
    Step,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    Main,
    /// The per-process screen of this PID.
    Process(u32),
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    None,
    /// `o` was pressed; the next key names the column.
    SortKey,
    /// The `/` prompt, with what was typed so far.
    Filter(String),
    /// A signal waiting for `y`.
    Confirm(Signal, Vec<Target>),
}

/// A finding as the view shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingView {
    pub id: gpulse_diagnose::FindingId,
    pub gpu: Option<u32>,
    pub title: String,
    pub lost_share: Option<f64>,
    pub time_to_oom_s: Option<f64>,
    pub advice: Option<String>,
}

/// One process's series for its screen.
#[derive(Debug, Clone)]
pub struct ProcHistory {
    pub cpu_pct: Ring,
    pub rss_gib: Ring,
    pub gpu_mem_gib: Ring,
    pub sm_pct: Ring,
}

pub struct App {
    pub devices: Vec<DeviceInfo>,
    pub poll: Option<Poll>,
    pub rows: Vec<Row>,
    pub gpu_history: Vec<GpuHistory>,
    pub host_cpu_pct: Ring,
    pub host_mem_pct: Ring,
    pub host_swap_pct: Ring,
    /// When each reading of the histories was taken, seconds (the charts' time axis).
    pub times_s: Ring,
    pub proc_history: HashMap<u32, ProcHistory>,
    pub findings: Vec<FindingView>,
    /// The findings are the final analysis of a replayed recording, not a live window's.
    pub final_analysis: bool,
    /// The live diagnosis has run (its 30 s warm-up is over): no findings then means it found
    /// nothing.
    pub diagnosed: bool,
    /// Each GPU's roofline in brief from the rolling diagnosis (`gpulse_diagnose::Efficiency::brief`).
    pub roofline: Vec<String>,
    /// The feed is a run made under `--instrument` (a replay of one): before its first step, the
    /// loop has no pace yet, and `--instrument` is not what it lacks.
    pub instrumented: bool,
    /// The loop's pace and its data-wait share, from the marks of `gpulse run --instrument`.
    pub steps_per_s: Option<f64>,
    pub data_wait_share: Option<f64>,
    /// The main thread of the job the pipeline samples (a replay's recording): now and so far.
    pub main_thread: Option<gpulse_live::jobs::MainThreadNow>,
    /// Of the whole machine (live): every main thread the view samples, the most sampled first.
    pub main_threads: Vec<gpulse_live::jobs::MainThreadNow>,
    /// The jobs `gpulse run` and `gpulse attach` watch on this machine, each with its own pace
    /// and leading finding (live only).
    pub jobs: Vec<gpulse_live::jobs::JobStatus>,
    /// The parent of each process above the rows, up to init, read with the latest frame (live
    /// only): how a row is found under a watched job without asking `/proc` under the lock.
    pub lineage: HashMap<u32, u32>,
    /// Each GPU's memory trend, GiB a minute.
    pub trend_gib_per_min: Vec<Option<f64>>,
    pub sort: Sort,
    pub filter: Filter,
    pub tree: bool,
    /// Rows grouped by pod or Slurm job (`g`).
    pub group: bool,
    /// Index into the shown rows.
    pub selected: usize,
    /// Tagged rows, by PID.
    pub tagged: BTreeSet<u32>,
    pub screen: Screen,
    pub prompt: Prompt,
    pub paused: bool,
    pub chart: Chart,
    /// The GPU whose charts are drawn.
    pub gpu_pick: usize,
    /// Why signals cannot be sent (`--readonly`, a replay), if they cannot.
    pub no_signals: Option<&'static str>,
    /// One line for the user: what a key did or could not do.
    pub message: Option<String>,
    /// Set in a replay: where it stands.
    pub replay: Option<String>,
    /// A replay has played its last poll.
    pub replay_ended: bool,
    /// The GPU source failed; the host goes on.
    pub failed: Option<String>,
    pub polls: u64,
}

/// A process's readings summed over its GPUs: CPU, RSS, GPU memory, %SM.
type ProcSums = (Option<f32>, Option<u64>, Option<u64>, Option<u32>);

/// What one frame says, worked out without the [`App`] (the rows, and the diagnosis' findings,
/// pace and trends, which take a while on a long window), so that it can be built off the lock.
pub struct Update {
    poll: Poll,
    rows: Vec<Row>,
    diagnosis: Option<DiagnosisView>,
}

/// The rolling diagnosis as the view shows it.
struct DiagnosisView {
    findings: Vec<FindingView>,
    diagnosed: bool,
    roofline: Vec<String>,
    steps_per_s: Option<f64>,
    data_wait_share: Option<f64>,
    main_thread: Option<gpulse_live::jobs::MainThreadNow>,
    main_threads: Vec<gpulse_live::jobs::MainThreadNow>,
    /// Each device's memory trend, in the devices' order.
    trend_gib_per_min: Vec<Option<f64>>,
}

impl Update {
    /// `procs`: the processes around the GPU processes, as this machine's `/proc` gave them
    /// (empty in a replay); `devices`: the view's, in its order.
    pub fn new(frame: &Frame, procs: &HashMap<u32, ProcNow>, devices: &[DeviceInfo]) -> Self {
        let mut rows = rows::build(frame.poll, procs);
        let diagnosis = frame.rolling.map(|rolling| {
            // The processes the diagnosis judged idle holders, by GPU and PID.
            let idle = rolling.idle_processes();
            for r in &mut rows {
                r.idle = r.gpu.is_some_and(|g| idle.contains(&(g, r.pid)));
            }
            DiagnosisView::new(rolling, devices)
        });
        Self { poll: frame.poll.clone(), rows, diagnosis }
    }
}

/// Findings as the view shows them, in the analysis's order: by severity, then by the ledger's
/// share of the wall time.
pub fn finding_views(found: &[gpulse_diagnose::Finding]) -> Vec<FindingView> {
    found
        .iter()
        .map(|f| FindingView {
            id: f.id,
            gpu: f.gpu,
            // A title may quote the job's stderr: escaped, like a command line.
            title: escape_control(&f.title),
            // The ledger's share, as every other view gives it.
            lost_share: f.wall_share(),
            time_to_oom_s: f.time_to_oom_s,
            advice: f.advice.first().map(|a| escape_control(a)),
        })
        .collect()
}

impl DiagnosisView {
    fn new(rolling: &RollingDiagnosis, devices: &[DeviceInfo]) -> Self {
        let findings = finding_views(rolling.current());
        let steps = rolling.recent_steps();
        Self {
            findings,
            diagnosed: rolling.diagnosed(),
            roofline: rolling.efficiency().iter().map(|e| e.brief()).collect(),
            steps_per_s: steps.as_ref().map(|s| s.per_s()).filter(|v| v.is_finite()),
            data_wait_share: steps.as_ref().and_then(|s| s.data_wait_share()),
            main_thread: gpulse_live::jobs::main_thread_now(rolling.main_thread()),
            main_threads: if rolling.is_whole_machine() {
                gpulse_live::jobs::every_main_thread(rolling.main_thread())
            } else {
                Vec::new()
            },
            trend_gib_per_min: devices.iter().map(|d| rolling.memory_trend_gib_per_min(d.index)).collect(),
        }
    }
}

impl App {
    pub fn new(devices: Vec<DeviceInfo>, no_signals: Option<&'static str>) -> Self {
        let n = devices.len();
        Self {
            gpu_history: (0..n).map(|_| GpuHistory::new(HISTORY_LEN)).collect(),
            trend_gib_per_min: vec![None; n],
            devices,
            poll: None,
            instrumented: false,
            rows: Vec::new(),
            host_cpu_pct: Ring::new(HISTORY_LEN),
            host_mem_pct: Ring::new(HISTORY_LEN),
            host_swap_pct: Ring::new(HISTORY_LEN),
            times_s: Ring::new(HISTORY_LEN),
            proc_history: HashMap::new(),
            findings: Vec::new(),
            final_analysis: false,
            diagnosed: false,
            roofline: Vec::new(),
            steps_per_s: None,
            data_wait_share: None,
            main_thread: None,
            main_threads: Vec::new(),
            jobs: Vec::new(),
            lineage: HashMap::new(),
            sort: Sort::default(),
            filter: Filter::default(),
            tree: false,
            group: false,
            selected: 0,
            tagged: BTreeSet::new(),
            screen: Screen::Main,
            prompt: Prompt::None,
            paused: false,
            chart: Chart::Util,
            gpu_pick: 0,
            no_signals,
            message: None,
            replay: None,
            replay_ended: false,
            failed: None,
            polls: 0,
        }
    }

    /// Takes in one frame of the pipeline, with the processes around the GPU processes as this
    /// machine's `/proc` gave them (empty in a replay).
    pub fn apply(&mut self, frame: &Frame, procs: &HashMap<u32, ProcNow>) {
        let update = Update::new(frame, procs, &self.devices);
        self.take(update);
    }

    /// Swaps in what a frame said, worked out beforehand: quick, so that the feed thread holds
    /// the lock the UI draws under only for this.
    pub fn take(&mut self, update: Update) {
        let Update { poll, rows, diagnosis } = update;
        self.polls += 1;
        if let Some(snap) = &poll.snapshot {
            for g in &snap.gpus {
                let Some(h) = self.gpu_history.get_mut(g.gpu_index as usize) else { continue };
                let total = g.memory_total_bytes.filter(|t| *t > 0);
                h.util_pct.push(g.util_gpu_pct.map(f64::from));
                h.sm_pct.push(g.sm_active_pct());
                h.mem_pct.push(g.memory_used_bytes.zip(total).map(|(u, t)| u as f64 / t as f64 * 100.0));
                let limit = g.power_cap_mw().filter(|l| *l > 0);
                h.power_pct.push(g.power_draw_mw.zip(limit).map(|(p, l)| f64::from(p) / f64::from(l) * 100.0));
            }
        }
        self.host_cpu_pct.push(poll.host.cpu_busy_pct.map(f64::from));
        let host_total = poll.host.memory_total_bytes.filter(|t| *t > 0);
        self.host_mem_pct.push(poll.host.memory_used_bytes.zip(host_total).map(|(u, t)| u as f64 / t as f64 * 100.0));
        self.host_swap_pct.push(crate::fmt::swap_pct(&poll.host));
        let t_us = poll.snapshot.as_ref().map_or(poll.host.timestamp_us, |s| s.timestamp_us);
        self.times_s.push(Some(t_us as f64 / 1e6));
        // Each share as this poll read it: one the sampler could not read is absent, not held.
        self.rows = rows;
        self.mark_jobs();
        self.track_processes();
        if let Some(d) = diagnosis.filter(|_| !self.final_analysis) {
            self.findings = d.findings;
            self.diagnosed = d.diagnosed;
            self.roofline = d.roofline;
            self.steps_per_s = d.steps_per_s;
            self.data_wait_share = d.data_wait_share;
            self.main_thread = d.main_thread;
            self.main_threads = d.main_threads;
            for (i, trend) in d.trend_gib_per_min.into_iter().enumerate().take(self.trend_gib_per_min.len()) {
                self.trend_gib_per_min[i] = trend;
            }
        }
        self.poll = Some(poll);
        self.clamp();
    }

    /// The watched jobs' own processes, and those under them (DataLoader workers, ranks), are
    /// of a watched tree: `tree`, where `top`'s own poll cannot tell.
    pub fn mark_jobs(&mut self) {
        if self.jobs.is_empty() {
            return;
        }
        let parent: HashMap<u32, u32> = self.rows.iter().filter_map(|r| Some((r.pid, r.ppid?))).collect();
        // What each process walked through turned out to be, so ancestors that rows share are
        // walked once a call, not once a row.
        let mut known: HashMap<u32, bool> = self.jobs.iter().map(|j| (j.pid, true)).collect();
        let mut under_a_job = |pid: u32| {
            let mut path = Vec::new();
            let mut at = pid;
            let found = loop {
                if let Some(&k) = known.get(&at) {
                    break k;
                }
                if path.len() >= 64 {
                    break false;
                }
                path.push(at);
                // A parent that is not in the table (a shell, a launcher without a GPU) is in the
                // lineage read with the frame: jobs are listed live only.
                match parent.get(&at).or_else(|| self.lineage.get(&at)).copied() {
                    Some(up) if up > 1 => at = up,
                    _ => break false,
                }
            };
            known.extend(path.into_iter().map(|p| (p, found)));
            found
        };
        for r in self.rows.iter_mut().filter(|r| r.class.is_none()) {
            if under_a_job(r.pid) {
                r.class = Some(gpulse_model::GpuProcessClass::Tree);
            }
        }
    }

    fn track_processes(&mut self) {
        let gib = |b: Option<u64>| b.map(|b| b as f64 / GIB as f64);
        let mut seen: HashMap<u32, ProcSums> = HashMap::new();
        for r in &self.rows {
            let e = seen.entry(r.pid).or_insert((r.cpu_pct, r.rss_bytes, None, None));
            if let Some(m) = r.gpu_mem_bytes {
                e.2 = Some(e.2.unwrap_or(0) + m);
            }
            if let Some(s) = r.sm_pct {
                e.3 = Some(e.3.unwrap_or(0) + s);
            }
        }
        self.proc_history.retain(|pid, _| seen.contains_key(pid));
        for (pid, (cpu, rss, mem, sm)) in seen {
            let h = self.proc_history.entry(pid).or_insert_with(|| ProcHistory {
                cpu_pct: Ring::new(HISTORY_LEN),
                rss_gib: Ring::new(HISTORY_LEN),
                gpu_mem_gib: Ring::new(HISTORY_LEN),
                sm_pct: Ring::new(HISTORY_LEN),
            });
            h.cpu_pct.push(cpu.map(f64::from));
            h.rss_gib.push(gib(rss));
            h.gpu_mem_gib.push(gib(mem));
            h.sm_pct.push(sm.map(f64::from));
        }
        self.tagged.retain(|pid| self.proc_history.contains_key(pid));
    }

    /// The rows shown, in order, with their depth in the tree.
    pub fn shown(&self) -> Vec<(usize, usize)> {
        let order = rows::arrange(&self.rows, &self.sort, &self.filter, self.tree);
        if self.group { rows::group_by_workload(&self.rows, order) } else { order }
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.shown().get(self.selected).map(|&(i, _)| &self.rows[i])
    }

    fn clamp(&mut self) {
        let n = self.shown().len();
        self.selected = self.selected.min(n.saturating_sub(1));
        self.gpu_pick = self.gpu_pick.min(self.devices.len().saturating_sub(1));
    }

    pub fn key(&mut self, key: Key) -> Action {
        if key == Key::CtrlC {
            return Action::Quit;
        }
        match std::mem::replace(&mut self.prompt, Prompt::None) {
            Prompt::SortKey => {
                match key {
                    Key::Char(c) => match Column::from_key(c) {
                        Some((column, reverse)) => self.sort = Sort { column, reverse },
                        None => self.message = Some(format!("no column under `{c}`; `?` lists them")),
                    },
                    _ => self.message = None,
                }
                return Action::None;
            }
            Prompt::Filter(mut typed) => {
                match key {
                    Key::Enter => match Filter::parse(&typed) {
                        Ok(f) => {
                            self.filter = f;
                            self.selected = 0;
                        }
                        Err(e) => self.message = Some(e),
                    },
                    Key::Esc => {}
                    Key::Backspace => {
                        typed.pop();
                        self.prompt = Prompt::Filter(typed);
                    }
                    Key::Char(c) => {
                        typed.push(c);
                        self.prompt = Prompt::Filter(typed);
                    }
                    _ => self.prompt = Prompt::Filter(typed),
                }
                return Action::None;
            }
            Prompt::Confirm(sig, targets) => {
                if key == Key::Char('y') || key == Key::Char('Y') {
                    self.tagged.clear();
                    return Action::Signal(sig, targets);
                }
                self.message = Some(format!("{} not sent", sig.name()));
                return Action::None;
            }
            Prompt::None => {}
        }
        if self.screen != Screen::Main {
            match key {
                Key::Char('q') => return Action::Quit,
                Key::Esc | Key::Enter | Key::Char('h' | '?') | Key::Backspace => self.screen = Screen::Main,
                _ => {}
            }
            return Action::None;
        }
        self.message = None;
        let n = self.shown().len();
        match key {
            Key::Char('q') => return Action::Quit,
            Key::Char('?' | 'h') => self.screen = Screen::Help,
            Key::Char('o') => self.prompt = Prompt::SortKey,
            Key::Char(',') => self.sort.step(-1),
            Key::Char('.') => self.sort.step(1),
            Key::Char('/') => self.prompt = Prompt::Filter(self.filter.describe()),
            Key::Esc => self.filter = Filter::default(),
            Key::Char('t') => self.tree = !self.tree,
            Key::Char('g') => self.group = !self.group,
            Key::Char('p') => self.paused = !self.paused,
            Key::Char('n') if self.replay.is_some() => return Action::Step,
            Key::Char('H') => self.chart = self.chart.next(),
            Key::Left | Key::Char('[') => self.gpu_pick = self.gpu_pick.saturating_sub(1),
            Key::Right | Key::Char(']') => {
                self.gpu_pick = (self.gpu_pick + 1).min(self.devices.len().saturating_sub(1));
            }
            Key::Up | Key::Char('k') => self.selected = self.selected.saturating_sub(1),
            Key::Down | Key::Char('j') => self.selected = (self.selected + 1).min(n.saturating_sub(1)),
            Key::PageUp => self.selected = self.selected.saturating_sub(10),
            Key::PageDown => self.selected = (self.selected + 10).min(n.saturating_sub(1)),
            Key::Home => self.selected = 0,
            Key::End => self.selected = n.saturating_sub(1),
            Key::Char(' ') => {
                if let Some(pid) = self.selected_row().map(|r| r.pid)
                    && !self.tagged.remove(&pid)
                {
                    self.tagged.insert(pid);
                }
                self.selected = (self.selected + 1).min(n.saturating_sub(1));
            }
            Key::Enter => {
                if let Some(pid) = self.selected_row().map(|r| r.pid) {
                    self.screen = Screen::Process(pid);
                }
            }
            Key::Char('I') => self.ask(Signal::Int),
            Key::Char('T') => self.ask(Signal::Term),
            Key::Char('K') => self.ask(Signal::Kill),
            _ => {}
        }
        self.clamp();
        Action::None
    }

    /// The tagged rows (else the selected one) as signal targets, asking before any is sent.
    fn ask(&mut self, sig: Signal) {
        if let Some(why) = self.no_signals {
            self.message = Some(format!("signals are off: {why}"));
            return;
        }
        let mut pids: Vec<u32> = self.tagged.iter().copied().collect();
        if pids.is_empty() {
            pids.extend(self.selected_row().map(|r| r.pid));
        }
        let mut targets = Vec::new();
        let mut unknown = Vec::new();
        for pid in pids {
            match self.rows.iter().find(|r| r.pid == pid) {
                Some(Row { start_ticks: Some(start), command, .. }) => {
                    targets.push(Target { pid, start_ticks: *start, label: command.clone().unwrap_or_default() })
                }
                _ => unknown.push(pid.to_string()),
            }
        }
        if !unknown.is_empty() {
            self.message = Some(format!("not signalled: PID {} is not a process of this machine", unknown.join(", ")));
            return;
        }
        if targets.is_empty() {
            self.message = Some("no process selected".into());
            return;
        }
        self.prompt = Prompt::Confirm(sig, targets);
    }
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "screen_tests.rs"]
mod screen_tests;
