//! The process table as data: one row per process and GPU, built from a poll (and, live, from
//! `/proc`), then filtered, sorted and laid out as a tree. No drawing here.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use gpulse_model::{GpuProcessClass, Poll};

use crate::fmt::escape_control;
use crate::procs::ProcNow;

/// One process on one GPU, or a CPU-only process of the tree (`gpu: None`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub gpu: Option<u32>,
    pub pid: u32,
    pub ppid: Option<u32>,
    pub user: Option<String>,
    pub gpu_mem_bytes: Option<u64>,
    pub sm_pct: Option<u32>,
    pub gmbw_pct: Option<u32>,
    pub cpu_pct: Option<f32>,
    pub host_mem_pct: Option<f32>,
    pub rss_bytes: Option<u64>,
    pub age_s: Option<f64>,
    /// The command line with its control characters escaped: one row, nothing for the terminal.
    pub command: Option<String>,
    pub class: Option<GpuProcessClass>,
    /// Holds GPU memory and does nothing: the live diagnosis' `idle_holder` names it.
    pub idle: bool,
    /// Known only for processes of this machine, live: what a signal is checked against.
    pub start_ticks: Option<u64>,
    /// The pod (`namespace/pod`) or Slurm job (`job 4711`) the process runs in, escaped.
    pub workload: Option<String>,
}

gpulse_base::words! {
    /// The columns, in the table's order, each written as its header.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Column {
        Gpu => "GPU",
        Pid => "PID",
        User => "USER",
        GpuMem => "GPU-MEM",
        Sm => "%SM",
        Gmbw => "%GMBW",
        Cpu => "%CPU",
        HostMem => "%MEM",
        Time => "TIME",
        Command => "COMMAND",
    }
}

impl Column {
    /// The key after `o` that sorts by it (the uppercase one reverses).
    pub fn key(self) -> char {
        match self {
            Column::Gpu => 'g',
            Column::Pid => 'p',
            Column::User => 'u',
            Column::GpuMem => 'm',
            Column::Sm => 's',
            Column::Gmbw => 'b',
            Column::Cpu => 'c',
            Column::HostMem => 'r',
            Column::Time => 't',
            Column::Command => 'n',
        }
    }

    pub fn from_key(c: char) -> Option<(Column, bool)> {
        let lower = c.to_ascii_lowercase();
        Column::ALL.into_iter().find(|col| col.key() == lower).map(|col| (col, c.is_ascii_uppercase()))
    }

    /// Numbers sort largest first, names A to Z, GPUs and PIDs in order.
    fn descending(self) -> bool {
        matches!(self, Column::GpuMem | Column::Sm | Column::Gmbw | Column::Cpu | Column::HostMem | Column::Time)
    }

    fn compare(self, a: &Row, b: &Row) -> Ordering {
        // An absent value sorts after every present one, whichever the direction.
        fn opt<T: PartialOrd>(a: &Option<T>, b: &Option<T>) -> Ordering {
            match (a, b) {
                (Some(x), Some(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        }
        let flip = |o: Ordering, a_none: bool, b_none: bool| {
            if self.descending() && !a_none && !b_none { o.reverse() } else { o }
        };
        let o = match self {
            Column::Gpu => opt(&a.gpu, &b.gpu),
            Column::Pid => a.pid.cmp(&b.pid),
            Column::User => opt(&a.user, &b.user),
            Column::GpuMem => {
                flip(opt(&a.gpu_mem_bytes, &b.gpu_mem_bytes), a.gpu_mem_bytes.is_none(), b.gpu_mem_bytes.is_none())
            }
            Column::Sm => flip(opt(&a.sm_pct, &b.sm_pct), a.sm_pct.is_none(), b.sm_pct.is_none()),
            Column::Gmbw => flip(opt(&a.gmbw_pct, &b.gmbw_pct), a.gmbw_pct.is_none(), b.gmbw_pct.is_none()),
            Column::Cpu => flip(opt(&a.cpu_pct, &b.cpu_pct), a.cpu_pct.is_none(), b.cpu_pct.is_none()),
            Column::HostMem => {
                flip(opt(&a.host_mem_pct, &b.host_mem_pct), a.host_mem_pct.is_none(), b.host_mem_pct.is_none())
            }
            Column::Time => flip(opt(&a.age_s, &b.age_s), a.age_s.is_none(), b.age_s.is_none()),
            Column::Command => opt(&a.command, &b.command),
        };
        o.then(a.gpu.cmp(&b.gpu)).then(a.pid.cmp(&b.pid))
    }
}

/// Which column orders the table, and whether the order is reversed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub column: Column,
    pub reverse: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Self { column: Column::Gpu, reverse: false }
    }
}

impl Sort {
    pub fn compare(&self, a: &Row, b: &Row) -> Ordering {
        let o = self.column.compare(a, b);
        if self.reverse { o.reverse() } else { o }
    }

    /// `,` and `.`: the column to the left or right.
    pub fn step(&mut self, by: isize) {
        let i = Column::ALL.iter().position(|c| *c == self.column).unwrap_or(0) as isize;
        let n = Column::ALL.len() as isize;
        self.column = Column::ALL[(i + by).rem_euclid(n) as usize];
    }
}

/// What the table keeps: every term must hold. Typed as `user:NAME`, `pid:N`, `gpu:N` or a word
/// of the command.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub user: Option<String>,
    pub pid: Option<u32>,
    pub gpu: Option<u32>,
    pub text: Option<String>,
}

impl Filter {
    /// Reads what was typed at the `/` prompt; a term it cannot read is returned as the error.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut f = Filter::default();
        for term in s.split_whitespace() {
            let (k, v) = term.split_once(':').unwrap_or(("", term));
            match k {
                "user" | "u" => f.user = Some(v.to_owned()),
                "pid" | "p" => f.pid = Some(v.parse().map_err(|_| format!("not a PID: {v}"))?),
                "gpu" | "g" => f.gpu = Some(v.parse().map_err(|_| format!("not a GPU index: {v}"))?),
                "" => {
                    let t = f.text.get_or_insert_with(String::new);
                    if !t.is_empty() {
                        t.push(' ');
                    }
                    t.push_str(v);
                }
                _ => return Err(format!("unknown filter {k}: (user:, pid:, gpu: or a word)")),
            }
        }
        Ok(f)
    }

    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    pub fn keeps(&self, r: &Row) -> bool {
        self.user.as_ref().is_none_or(|u| r.user.as_ref() == Some(u))
            && self.pid.is_none_or(|p| r.pid == p || r.ppid == Some(p))
            && self.gpu.is_none_or(|g| r.gpu == Some(g))
            && self.text.as_ref().is_none_or(|t| r.command.as_ref().is_some_and(|c| c.contains(t.as_str())))
    }

    /// As it would be typed again.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(u) = &self.user {
            parts.push(format!("user:{u}"));
        }
        if let Some(p) = self.pid {
            parts.push(format!("pid:{p}"));
        }
        if let Some(g) = self.gpu {
            parts.push(format!("gpu:{g}"));
        }
        if let Some(t) = &self.text {
            parts.push(t.clone());
        }
        parts.join(" ")
    }
}

/// The rows of one poll. `procs` has what `/proc` says of this machine's processes (empty in a
/// replay, where the recording's tree gives CPU and memory); CPU-only processes of the tree and
/// around the GPU processes get rows of their own.
pub fn build(poll: &Poll, procs: &HashMap<u32, ProcNow>) -> Vec<Row> {
    let host_total = poll.host.memory_total_bytes.filter(|t| *t > 0);
    let tree: HashMap<u32, &gpulse_model::TreeProcess> =
        poll.tree.iter().flat_map(|t| &t.processes).map(|p| (p.pid, p)).collect();
    let mem_pct = |rss: Option<u64>| rss.zip(host_total).map(|(r, t)| (r as f64 / t as f64 * 100.0) as f32);
    let mut rows = Vec::new();
    let mut on_gpu = HashSet::new();
    let gpus = poll.snapshot.iter().flat_map(|s| &s.gpus);
    for g in gpus {
        for p in &g.processes {
            on_gpu.insert(p.pid);
            let t = tree.get(&p.pid);
            let l = procs.get(&p.pid);
            let rss = l.and_then(|l| l.rss_bytes).or(t.and_then(|t| t.rss_bytes));
            rows.push(Row {
                gpu: Some(g.gpu_index),
                pid: p.pid,
                ppid: l.and_then(|l| l.ppid).or(t.map(|t| t.ppid)),
                user: p.user.clone().or_else(|| l.and_then(|l| l.user.clone())),
                gpu_mem_bytes: p.used_memory_bytes,
                sm_pct: p.sm_util_pct,
                gmbw_pct: p.mem_util_pct,
                cpu_pct: l.and_then(|l| l.cpu_pct).or(t.and_then(|t| t.cpu_pct)),
                host_mem_pct: mem_pct(rss),
                rss_bytes: rss,
                age_s: l.and_then(|l| l.age_s),
                command: p
                    .cmdline
                    .clone()
                    .or_else(|| l.and_then(|l| l.cmdline.clone()))
                    .or_else(|| t.and_then(|t| t.cmdline.clone()))
                    .or_else(|| p.name.clone())
                    .as_deref()
                    .map(escape_control),
                class: p.class,
                idle: false,
                start_ticks: l.and_then(|l| l.start_ticks),
                workload: p.workload.as_ref().map(|w| escape_control(&w.group().short())),
            });
        }
    }
    for t in tree.values().filter(|t| !on_gpu.contains(&t.pid)) {
        let l = procs.get(&t.pid);
        let rss = l.and_then(|l| l.rss_bytes).or(t.rss_bytes);
        rows.push(Row {
            pid: t.pid,
            ppid: Some(t.ppid),
            user: l.and_then(|l| l.user.clone()),
            cpu_pct: l.and_then(|l| l.cpu_pct).or(t.cpu_pct),
            host_mem_pct: mem_pct(rss),
            rss_bytes: rss,
            age_s: l.and_then(|l| l.age_s),
            command: t.cmdline.as_deref().or(l.and_then(|l| l.cmdline.as_deref())).map(escape_control),
            class: Some(GpuProcessClass::Tree),
            start_ticks: l.and_then(|l| l.start_ticks),
            ..Row::default()
        });
    }
    for (pid, l) in procs.iter().filter(|(pid, _)| !on_gpu.contains(pid) && !tree.contains_key(pid)) {
        rows.push(Row {
            pid: *pid,
            ppid: l.ppid,
            user: l.user.clone(),
            cpu_pct: l.cpu_pct,
            host_mem_pct: mem_pct(l.rss_bytes),
            rss_bytes: l.rss_bytes,
            age_s: l.age_s,
            command: l.cmdline.as_deref().map(escape_control),
            start_ticks: l.start_ticks,
            ..Row::default()
        });
    }
    inherit_workloads(&mut rows);
    rows
}

/// A CPU-only row (a DataLoader worker) runs in its parent's pod or job: a child shares its
/// parent's cgroup unless moved, and a pod's processes are never moved out of it.
fn inherit_workloads(rows: &mut [Row]) {
    let mut known: HashMap<u32, String> = rows.iter().filter_map(|r| Some((r.pid, r.workload.clone()?))).collect();
    // Each pass reaches one generation further down; workers of workers are rare past two.
    for _ in 0..4 {
        let mut changed = false;
        for r in rows.iter_mut().filter(|r| r.workload.is_none()) {
            if let Some(w) = r.ppid.and_then(|p| known.get(&p)).cloned() {
                known.insert(r.pid, w.clone());
                r.workload = Some(w);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// `order` (as [`arrange`] gave it) grouped by pod or Slurm job, groups A to Z and the rows of
/// none last; within a group the order stays. Depths are dropped: a group is not a tree.
pub fn group_by_workload(rows: &[Row], mut order: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    order.sort_by(|&(a, _), &(b, _)| match (&rows[a].workload, &rows[b].workload) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    });
    order.into_iter().map(|(i, _)| (i, 0)).collect()
}

/// The rows shown, in order, each with its depth in the tree (0 when the tree is off).
pub fn arrange(rows: &[Row], sort: &Sort, filter: &Filter, tree: bool) -> Vec<(usize, usize)> {
    let mut kept: Vec<usize> = (0..rows.len()).filter(|&i| filter.keeps(&rows[i])).collect();
    kept.sort_by(|&a, &b| sort.compare(&rows[a], &rows[b]));
    if !tree {
        return kept.into_iter().map(|i| (i, 0)).collect();
    }
    // A row hangs under the first kept row of its parent PID; the others are roots.
    let mut first_of: HashMap<u32, usize> = HashMap::new();
    for &i in &kept {
        first_of.entry(rows[i].pid).or_insert(i);
    }
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for &i in &kept {
        match rows[i].ppid.and_then(|p| first_of.get(&p)).filter(|&&parent| parent != i) {
            Some(&parent) => children.entry(parent).or_default().push(i),
            None => roots.push(i),
        }
    }
    let mut out = Vec::with_capacity(kept.len());
    let mut seen = HashSet::new();
    let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if !seen.insert(i) {
            continue;
        }
        out.push((i, depth));
        if let Some(c) = children.get(&i) {
            stack.extend(c.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, ppid: u32, gpu: Option<u32>, mem_gib: Option<u64>, user: &str) -> Row {
        Row {
            pid,
            ppid: Some(ppid),
            gpu,
            gpu_mem_bytes: mem_gib.map(|g| g << 30),
            user: Some(user.into()),
            command: Some(format!("python train.py --rank {pid}")),
            ..Row::default()
        }
    }

    #[test]
    fn workers_run_in_their_parents_pod() {
        let mut rows = table();
        rows[1].workload = Some("team-a/train-a".into());
        inherit_workloads(&mut rows);
        let of = |pid: u32| rows.iter().find(|r| r.pid == pid).unwrap().workload.clone();
        assert_eq!(of(40), Some("team-a/train-a".into()), "a worker of PID 20");
        assert_eq!(of(10), None, "a parent is not its child's pod");
        assert_eq!(of(50), None);
    }

    fn pids(rows: &[Row], order: &[(usize, usize)]) -> Vec<u32> {
        order.iter().map(|&(i, _)| rows[i].pid).collect()
    }

    fn table() -> Vec<Row> {
        vec![
            row(30, 10, Some(1), Some(8), "ana"),
            row(20, 10, Some(0), Some(20), "ana"),
            row(10, 1, None, None, "ana"),
            row(40, 20, None, None, "ana"),
            row(50, 1, Some(0), Some(2), "bo"),
            row(60, 1, Some(1), None, "bo"),
        ]
    }

    #[test]
    fn sorts_by_each_column_with_absent_values_last() {
        let rows = table();
        let f = Filter::default();
        let by = |column, reverse| pids(&rows, &arrange(&rows, &Sort { column, reverse }, &f, false));
        assert_eq!(by(Column::Gpu, false), [20, 50, 30, 60, 10, 40]);
        assert_eq!(by(Column::GpuMem, false), [20, 30, 50, 10, 40, 60], "largest first, none last");
        assert_eq!(by(Column::GpuMem, true), [60, 40, 10, 50, 30, 20]);
        assert_eq!(by(Column::Pid, false), [10, 20, 30, 40, 50, 60]);
        let mut s = Sort::default();
        s.step(-1);
        assert_eq!(s.column, Column::Command, "`,` from the first column wraps to the last");
        s.step(2);
        assert_eq!(s.column, Column::Pid);
        assert_eq!(Column::from_key('M'), Some((Column::GpuMem, true)));
        assert_eq!(Column::from_key('x'), None);
    }

    #[test]
    fn filters_by_user_pid_gpu_and_word() {
        let rows = table();
        let shown = |s: &str| {
            let f = Filter::parse(s).unwrap();
            pids(&rows, &arrange(&rows, &Sort { column: Column::Pid, reverse: false }, &f, false))
        };
        assert_eq!(shown("user:bo"), [50, 60]);
        assert_eq!(shown("gpu:1"), [30, 60]);
        assert_eq!(shown("pid:10"), [10, 20, 30], "a PID keeps its children");
        assert_eq!(shown("u:ana g:0"), [20]);
        assert_eq!(shown("rank 40"), [40], "words match together");
        assert_eq!(shown("nothing"), [0u32; 0]);
        assert!(Filter::parse("pid:x").unwrap_err().contains("not a PID"));
        assert!(Filter::parse("host:a").is_err());
        assert_eq!(Filter::parse("user:ana gpu:1 word").unwrap().describe(), "user:ana gpu:1 word");
    }

    #[test]
    fn the_tree_hangs_workers_and_ranks_under_their_launcher() {
        let rows = table();
        let order = arrange(&rows, &Sort::default(), &Filter::default(), true);
        let shown: Vec<(u32, usize)> = order.iter().map(|&(i, d)| (rows[i].pid, d)).collect();
        // 10 launches ranks 20 and 30; 40 is 20's DataLoader worker.
        assert_eq!(shown, [(50, 0), (60, 0), (10, 0), (20, 1), (40, 2), (30, 1)]);
        // Filtered to GPU 1, rank 30 has no parent left and stands as a root.
        let f = Filter::parse("gpu:1").unwrap();
        let order = arrange(&rows, &Sort::default(), &f, true);
        assert!(order.iter().all(|&(_, d)| d == 0));
    }

    #[test]
    fn a_poll_becomes_rows_with_cpu_only_tree_processes() {
        use gpulse_model::{GpuSample, HostSample, ProcessSample, Snapshot, TreeProcess, TreeSample};
        let gpu = GpuSample {
            gpu_index: 0,
            processes: vec![ProcessSample {
                pid: 7,
                used_memory_bytes: Some(1 << 30),
                class: Some(GpuProcessClass::Tree),
                ..Default::default()
            }],
            ..Default::default()
        };
        let tp = |pid, ppid, cpu| TreeProcess {
            pid,
            ppid,
            cpu_pct: Some(cpu),
            rss_bytes: Some(1 << 30),
            cmdline: Some(format!("python w{pid}")),
            ..Default::default()
        };
        let poll = Poll {
            snapshot: Some(Snapshot { timestamp_us: 1, gpus: vec![gpu] }),
            host: HostSample { memory_total_bytes: Some(4 << 30), ..Default::default() },
            tree: Some(TreeSample { processes: vec![tp(7, 1, 90.0), tp(8, 7, 40.0)], ..Default::default() }),
            ..Default::default()
        };
        let mut rows = build(&poll, &HashMap::new());
        rows.sort_by_key(|r| r.pid);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].gpu, rows[0].cpu_pct, rows[0].host_mem_pct), (Some(0), Some(90.0), Some(25.0)));
        assert_eq!(rows[0].command.as_deref(), Some("python w7"));
        assert_eq!((rows[1].gpu, rows[1].gpu_mem_bytes, rows[1].class), (None, None, Some(GpuProcessClass::Tree)));
        assert_eq!(rows[1].start_ticks, None, "a recording's process cannot be signalled");
    }
}
