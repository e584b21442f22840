//! A [`Run`] from a recording's samples: the GPUs' series one snapshot at a time, then the
//! host, the process tree, the marks and the stacks, each from its own source.

use gpulse_model::RunData;

use super::{GpuSeries, IoBlocked, Run, TreeIo, TreePss, active_window};

/// Builds a [`Run`] one snapshot at a time, so a long recording is never held whole.
#[derive(Debug, Default)]
pub struct RunBuilder {
    gpus: Vec<GpuSeries>,
    start_us: Option<i64>,
}

impl RunBuilder {
    /// Adds one snapshot.
    pub fn push(&mut self, snap: &gpulse_model::Snapshot) {
        let start = *self.start_us.get_or_insert(snap.timestamp_us);
        let t = snap.timestamp_us.saturating_sub(start) as f64 / 1e6;
        for g in &snap.gpus {
            let pos = match self.gpus.iter().position(|s| s.gpu == g.gpu_index) {
                Some(p) => p,
                None => {
                    self.gpus.push(GpuSeries { gpu: g.gpu_index, ..GpuSeries::default() });
                    self.gpus.len() - 1
                }
            };
            let s = &mut self.gpus[pos];
            s.t_s.push(t);
            s.util_pct.push(g.util_gpu_pct.map(f64::from));
            for u in &g.util_gpu_samples {
                let at = u.timestamp_us.saturating_sub(start) as f64 / 1e6;
                if s.util_fine.last().is_none_or(|l| at > l.0) {
                    s.util_fine.push((at, f64::from(u.util_pct)));
                }
            }
            s.sm_pct.push(g.sm_active_pct());
            s.mem_used_bytes.push(g.memory_used_bytes.map(|b| b as f64));
            if let Some(total) = g.memory_total_bytes {
                s.mem_total_bytes = Some(total as f64);
            }
            s.power_w.push(g.power_draw_w());
            s.temp_c.push(g.temperature_gpu_c.map(f64::from));
            s.sm_clock_mhz.push(g.clock_sm_mhz.map(f64::from));
            s.reasons.push(g.clocks_event_reasons);
            s.pcie_rx_bytes_per_s.push(g.pcie_rx_bytes_per_s.map(|b| b as f64));
            s.pcie_tx_bytes_per_s.push(g.pcie_tx_bytes_per_s.map(|b| b as f64));
            if let (Some(gen_), Some(width)) = (g.pcie_link_gen, g.pcie_link_width) {
                let (g0, w0) = s.pcie_link_max.unwrap_or((0, 0));
                s.pcie_link_max = Some((g0.max(gen_), w0.max(width)));
            }
            s.tensor_pct.push(g.gpm.as_ref().and_then(|m| m.any_tensor_util_pct));
            s.fp32_pct.push(g.gpm.as_ref().and_then(|m| m.fp32_util_pct));
            let gpm = |f: fn(&gpulse_model::GpmMetrics) -> Option<f64>| g.gpm.as_deref().and_then(f);
            s.hmma_pct.push(gpm(|m| m.hmma_tensor_util_pct));
            s.imma_pct.push(gpm(|m| m.imma_tensor_util_pct));
            s.dfma_pct.push(gpm(|m| m.dfma_tensor_util_pct));
            s.fp64_pct.push(gpm(|m| m.fp64_util_pct));
            s.fp16_pct.push(gpm(|m| m.fp16_util_pct));
            s.dram_pct.push(gpm(|m| m.dram_bw_util_pct));
            s.energy_mj.push(g.energy_mj.map(|e| e as f64));
            if let Some(m) = g.gpm.as_ref().filter(|m| m.interval_ms > 0.0) {
                s.gpm_window_s = Some(s.gpm_window_s.unwrap_or(0.0).max(m.interval_ms / 1000.0));
            }
            s.nvlink_bytes_per_s
                .push(g.gpm.as_ref().and_then(|m| Some(m.nvlink_tx_bytes_per_s? + m.nvlink_rx_bytes_per_s?)));
            if !g.nvlinks.is_empty() {
                let up = g.nvlinks.iter().filter(|l| l.active).count() as u32;
                s.nvlink_active_links = Some(s.nvlink_active_links.unwrap_or(0).max(up));
            }
            if s.reset_pending.is_none()
                && let Some(key) = ["remapped_rows_pending", "retired_pages_pending"]
                    .into_iter()
                    .find(|k| g.table.value(k).is_some_and(|v| v > 0))
            {
                s.reset_pending = Some((t, key));
            }
            if g.status == gpulse_model::DeviceStatus::Lost && s.lost_at_s.is_none() {
                s.lost_at_s = Some(t);
            }
            // Listings repeat from sample to sample: share one copy while they do not change.
            let same = s.processes.last().is_some_and(|p| **p == g.processes);
            let listing = if same {
                s.processes.last().cloned().unwrap_or_default()
            } else {
                std::sync::Arc::new(g.processes.clone())
            };
            s.processes.push(listing);
        }
    }

    /// The run, with the host, tree and events of `rec` (whose snapshots are not read again).
    pub fn finish(self, rec: &RunData) -> Run {
        self.finish_with(rec, rec.stacks.clone())
    }

    /// [`RunBuilder::finish`] with `rec`'s stacks handed over, not copied: a day of ranks'
    /// samples are the largest thing a recording holds.
    pub fn finish_with(mut self, rec: &RunData, stacks: gpulse_model::Stacks) -> Run {
        // Without GPU samples (no driver), time starts with the host's first sample or first mark.
        let first_mark = rec.markers.iter().map(|m| m.t_us).min();
        let start_us = self
            .start_us
            .or(match (rec.host.first().map(|h| h.timestamp_us), first_mark) {
                (Some(h), Some(m)) => Some(h.min(m)),
                (h, m) => h.or(m),
            })
            .or(stacks.samples.first().map(|s| s.t_us))
            .unwrap_or(0);
        let t = |us: i64| us.saturating_sub(start_us) as f64 / 1e6;
        for s in &mut self.gpus {
            s.active = active_window(s);
            let info = rec.devices.iter().find(|d| d.index == s.gpu);
            s.mem_total_bytes = s.mem_total_bytes.or(info.and_then(|d| d.memory_total_bytes).map(|b| b as f64));
            s.max_sm_clock_mhz = info.and_then(|d| d.clock_max_sm_mhz).map(f64::from);
            s.name = info.map(|d| d.name.clone());
            let up =
                rec.events.iter().filter(|e| e.kind == gpulse_model::EventKind::Nvlink && e.payload["gpu"] == s.gpu);
            for n in up.filter_map(|e| e.payload["active_links"].as_u64()) {
                s.nvlink_active_links = Some(s.nvlink_active_links.unwrap_or(0).max(n as u32));
            }
        }
        let gpus = self.gpus;
        let has_gpm = gpus.iter().any(|g| g.sm_pct.iter().any(Option::is_some));
        let has_processes = gpus.iter().any(|g| g.processes.iter().any(|p| !p.is_empty()));
        let stacks = super::settled(stacks);
        let ranks = super::ranked_in(&stacks);
        let mut run = Run { gpus, start_us, has_gpm, has_processes, ..Run::default() };
        tree(rec, &t, &mut run);
        let mains = stacks.processes.iter().filter(|p| p.role == gpulse_model::ProcessRole::Main);
        run.main_cpu = mains
            .map(|m| {
                let own = rec.trees.iter().filter_map(|tr| {
                    let p = tr.processes.iter().find(|p| p.pid == m.pid)?;
                    Some((t(tr.timestamp_us), f64::from(p.cpu_pct?)))
                });
                (m.pid, own.collect())
            })
            .collect();
        host(rec, &t, &mut run);
        marks(rec, &ranks, &mut run);
        run.events =
            rec.events.iter().map(|e| (e.kind.clone(), t(e.t_ms.saturating_mul(1000)), e.payload.clone())).collect();
        run.stacks = std::sync::Arc::new(stacks);
        run.ranks = ranks.into();
        run
    }
}

/// What the process tree says: the tree's CPU and width, the DataLoader workers (CPU, count,
/// restarts, threads), who sat blocked on I/O, `torch.compile`'s workers, storage I/O and memory.
fn tree(rec: &RunData, t: &impl Fn(i64) -> f64, run: &mut Run) {
    run.tree_cpu = rec.trees.iter().filter_map(|tr| Some((t(tr.timestamp_us), f64::from(tr.cpu_pct?)))).collect();
    run.tree_width = rec.trees.iter().map(|tr| tr.processes.len()).max().unwrap_or(0);
    // DataLoader workers: children of a process holding a GPU context that hold none
    // themselves (torchrun's ranks hold contexts; a launcher holds none and has no GPU parent).
    let gpu_pids: std::collections::HashSet<u32> =
        run.gpus.iter().flat_map(|g| g.processes.iter().flat_map(|l| l.iter().map(|p| p.pid))).collect();
    // A DataLoader worker is forked: it keeps its parent's command line. A helper the
    // training spawns (an MPI daemon, a compile worker) runs another program.
    let cmdlines: std::collections::HashMap<u32, &str> = rec
        .trees
        .iter()
        .flat_map(|tr| tr.processes.iter())
        .filter_map(|p| Some((p.pid, p.cmdline.as_deref()?)))
        .collect();
    let forked = |p: &gpulse_model::TreeProcess| match (cmdlines.get(&p.pid), cmdlines.get(&p.ppid)) {
        (Some(c), Some(parent)) => c == parent,
        _ => true,
    };
    // A DataLoader worker: a forked child of a GPU process that holds no GPU context itself.
    let is_worker =
        |p: &gpulse_model::TreeProcess| gpu_pids.contains(&p.ppid) && !gpu_pids.contains(&p.pid) && forked(p);
    let per_worker: Vec<f64> = rec
        .trees
        .iter()
        .filter_map(|tr| {
            let w: Vec<f64> =
                tr.processes.iter().filter(|p| is_worker(p)).filter_map(|p| p.cpu_pct.map(f64::from)).collect();
            (!w.is_empty()).then(|| w.iter().sum::<f64>() / w.len() as f64)
        })
        .collect();
    run.worker_count =
        rec.trees.iter().map(|tr| tr.processes.iter().filter(|p| is_worker(p)).count()).max().unwrap_or(0);
    run.worker_cpu_mean = (!per_worker.is_empty()).then(|| per_worker.iter().sum::<f64>() / per_worker.len() as f64);
    let mut worker_restarts_s = Vec::new();
    let mut last_set: Vec<u32> = Vec::new();
    for tr in &rec.trees {
        let set: Vec<u32> = tr.processes.iter().filter(|p| is_worker(p)).map(|p| p.pid).collect();
        if set.is_empty() {
            continue;
        }
        if !last_set.is_empty() && !set.iter().any(|p| last_set.contains(p)) {
            worker_restarts_s.push(t(tr.timestamp_us));
        }
        last_set = set;
    }
    run.worker_threads_max =
        rec.trees.iter().flat_map(|tr| tr.processes.iter().filter(|p| is_worker(p)).filter_map(|p| p.threads)).max();
    run.tree_threads_max = rec
        .trees
        .iter()
        .filter(|tr| tr.processes.iter().any(|p| p.threads.is_some()))
        .map(|tr| tr.processes.iter().filter_map(|p| p.threads).sum::<u32>())
        .max();
    run.io_blocked = rec
        .trees
        .iter()
        .map(|tr| {
            let in_d = |p: &gpulse_model::TreeProcess| p.state == Some('D');
            let main: Vec<&gpulse_model::TreeProcess> =
                match tr.processes.iter().filter(|p| gpu_pids.contains(&p.pid)).collect::<Vec<_>>() {
                    held if !held.is_empty() => held,
                    _ => tr.processes.iter().filter(|p| p.pid == tr.root_pid).collect(),
                };
            let workers: Vec<&gpulse_model::TreeProcess> = tr.processes.iter().filter(|p| is_worker(p)).collect();
            let share =
                (!workers.is_empty()).then(|| workers.iter().filter(|p| in_d(p)).count() as f64 / workers.len() as f64);
            IoBlocked { t_s: t(tr.timestamp_us), main: main.iter().any(|p| in_d(p)), workers_share: share }
        })
        .collect();
    // TorchInductor compiles in a pool of `compile_worker` processes of its own (a command
    // line may be kept only where a process first appears).
    let compilers: std::collections::HashSet<u32> =
        cmdlines.iter().filter(|(_, c)| c.contains("compile_worker")).map(|(pid, _)| *pid).collect();
    let compiling: Vec<f64> = rec
        .trees
        .iter()
        .filter(|tr| tr.processes.iter().any(|p| compilers.contains(&p.pid)))
        .map(|tr| t(tr.timestamp_us))
        .collect();
    run.compile_workers_s = compiling.first().map(|a| [*a, *compiling.last().unwrap_or(a)]);
    let is_main = |tr: &gpulse_model::TreeSample, p: &gpulse_model::TreeProcess| {
        if tr.processes.iter().any(|q| gpu_pids.contains(&q.pid)) {
            gpu_pids.contains(&p.pid)
        } else {
            p.pid == tr.root_pid
        }
    };
    let mut tree_io = Vec::new();
    for w in rec.trees.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (mut read, mut written, mut by_workers) = (0.0, 0.0, 0.0);
        for p in &b.processes {
            let Some(q) = a.processes.iter().find(|q| q.pid == p.pid) else { continue };
            let delta = |x: Option<u64>, y: Option<u64>| x.zip(y).map_or(0.0, |(x, y)| y.saturating_sub(x) as f64);
            let r = delta(q.read_bytes, p.read_bytes);
            read += r;
            written += delta(q.write_bytes, p.write_bytes);
            if is_worker(p) {
                by_workers += r;
            }
        }
        tree_io.push(TreeIo {
            end_s: t(b.timestamp_us),
            seconds: (b.timestamp_us - a.timestamp_us) as f64 / 1e6,
            read_bytes: read,
            written_bytes: written,
            workers_read_bytes: by_workers,
        });
    }
    let mut last_pss: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    run.tree_pss = rec
        .trees
        .iter()
        .filter_map(|tr| {
            for p in &tr.processes {
                if let Some(v) = p.pss_bytes {
                    last_pss.insert(p.pid, v);
                }
            }
            let of = |p: &gpulse_model::TreeProcess| last_pss.get(&p.pid).map(|v| *v as f64);
            let main: Vec<f64> = tr.processes.iter().filter(|p| is_main(tr, p)).filter_map(of).collect();
            let workers: Vec<f64> = tr.processes.iter().filter(|p| is_worker(p)).filter_map(of).collect();
            let main_rss: f64 =
                tr.processes.iter().filter(|p| is_main(tr, p)).filter_map(|p| p.rss_bytes).map(|b| b as f64).sum();
            (!main.is_empty()).then(|| TreePss {
                t_s: t(tr.timestamp_us),
                main_bytes: main.iter().sum(),
                workers_bytes: workers.iter().sum(),
                workers: workers.len(),
                main_rss_bytes: main_rss,
            })
        })
        .collect();
    run.worker_restarts_s = worker_restarts_s;
    run.tree_io = tree_io;
}

/// What the host says: its CPU, cores, memory and I/O wait. Its samples are gpulse's own
/// recording's, which lists the GPUs' processes with them.
fn host(rec: &RunData, t: &impl Fn(i64) -> f64, run: &mut Run) {
    run.host_iowait = rec.host.iter().filter_map(|h| Some((t(h.timestamp_us), f64::from(h.cpu_iowait_pct?)))).collect();
    run.host_mem_total_bytes = rec.host.iter().rev().find_map(|h| h.memory_total_bytes).map(|b| b as f64);
    run.host_cpu = rec.host.iter().filter_map(|h| Some((t(h.timestamp_us), f64::from(h.cpu_busy_pct?)))).collect();
    run.cores = rec.host.iter().map(|h| h.cpu_core_busy_pct.len()).max().unwrap_or(0);
    run.host_mem_used_pct = rec
        .host
        .iter()
        .filter_map(|h| {
            let (used, total) = (h.memory_used_bytes?, h.memory_total_bytes.filter(|t| *t > 0)?);
            Some((t(h.timestamp_us), 100.0 * used as f64 / total as f64))
        })
        .collect();
    run.processes_read = !rec.host.is_empty();
}

/// What the loop's marks say: its steps (a distributed job's lowest rank's, each rank's beside),
/// its waits for data, phases and copies.
fn marks(rec: &RunData, ranks: &[(gpulse_model::Rank, u32)], run: &mut Run) {
    let start_us = run.start_us;
    // A distributed job's ranks each mark their own steps and waits: the run's loop is its
    // lowest rank's (the process the ledger reads), and the waits the ledger counts are that
    // rank's alone (another rank's wait for data is no time this one waited).
    let steps_by_pid = crate::Steps::per_process(&rec.markers, start_us, rec.instrumented());
    let lowest_rank = ranks.first().map(|r| r.1);
    let steps = match lowest_rank.and_then(|pid| steps_by_pid.iter().find(|s| s.pid == pid)) {
        Some(s) => Some(crate::Steps { ranks: steps_by_pid.len(), ..s.clone() }),
        None => crate::Steps::from_markers(&rec.markers, start_us, rec.instrumented()),
    };
    let own: Vec<gpulse_model::Marker>;
    let markers = match &steps {
        Some(s) if s.ranks > 1 => {
            own = rec.markers.iter().filter(|m| m.pid == s.pid).cloned().collect();
            &own[..]
        }
        _ => &rec.markers[..],
    };
    crate::steps::Spans {
        waits: run.data_waits_s,
        folded_waits: run.folded_waits_s,
        phases: run.phases_s,
        copies: run.copies_s,
    } = crate::steps::spans(markers, start_us);
    run.steps = steps;
    run.steps_by_pid = steps_by_pid;
}

#[cfg(test)]
mod tests {
    /// A fresh DataLoader iterator forks new workers: a set of new PIDs with none of the last
    /// left is a restart, whether or not a listing without workers came between; one worker
    /// replaced beside another that stays is not.
    #[test]
    fn workers_replaced_by_new_pids_are_restarts() {
        use super::{Run, RunData};
        use gpulse_model::{GpuSample, ProcessSample, Snapshot, TreeProcess, TreeSample};
        // The training process 10 holds GPU 0; its workers are 11-12, then 21-22 from 5 s, and
        // none between 9 and 10 s, then 31-32 from 10 s, 32 staying into 11 s beside 41.
        let at = |s: i64| s * 1_000_000;
        let sets: [(i64, &[u32]); 7] =
            [(0, &[11, 12]), (4, &[11, 12]), (5, &[21, 22]), (9, &[]), (10, &[31, 32]), (11, &[32, 41]), (12, &[41])];
        let proc = |pid: u32, ppid: u32| TreeProcess {
            pid,
            ppid,
            cmdline: Some("python train.py".into()),
            ..TreeProcess::default()
        };
        let rec = RunData {
            snapshots: sets
                .iter()
                .map(|(t, _)| Snapshot {
                    timestamp_us: at(*t),
                    gpus: vec![GpuSample {
                        processes: vec![ProcessSample { pid: 10, ..ProcessSample::default() }],
                        ..GpuSample::default()
                    }],
                })
                .collect(),
            trees: sets
                .iter()
                .map(|(t, w)| TreeSample {
                    timestamp_us: at(*t),
                    root_pid: 10,
                    processes: std::iter::once(proc(10, 1)).chain(w.iter().map(|p| proc(*p, 10))).collect(),
                    ..TreeSample::default()
                })
                .collect(),
            ..RunData::default()
        };
        assert_eq!(Run::from_recording(&rec).worker_restarts_s, [5.0, 10.0]);
    }

    /// A collector thread or a server hands a run on: it must be `Send` (and shared, `Sync`).
    #[test]
    fn a_run_can_cross_threads() {
        fn crosses<T: Send + Sync>() {}
        crosses::<super::Run>();
    }
}
