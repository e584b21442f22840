//! The ledger's host-side time split by what the main thread did, and a finding for each part
//! that costs a twentieth of the wall time or more.

use std::collections::HashMap;

use super::advice::{Situation, advise, label, upper};
use super::cause::{
    Cause, Facts, HOLDER_SHARE, Part, THREAD_BEYOND_COST, other_threads_cores, overlap_words, read_back_lines, top,
};
use super::idle::{Tier, idle_weights};
use super::loader::workers_site;
use super::{Domain, ThreadState, points, site_text};
use crate::ledger::{Account, AccountKind, GPU_IDLE_IN_LOOP, LOOP_WITHOUT_GPU, Ledger, NO_LOOP};
use crate::rules::MATERIAL;
use crate::run::main_pid;
use crate::run::{covers, merged};
use crate::{Basis, Finding, FindingId, Run, Severity, round};

/// Samples below this in the idle time say too little to split it: the share of a state from
/// n samples is known to ±0.5/√n at worst, ±11 points at 20.
const MIN_SAMPLES: usize = 20;
/// Half the loop lost: fixing it would double the steps/s.
const CRITICAL_LOOP_SHARE: f64 = 0.5;

/// A main-thread finding's severity by its share of the loop: also for one whose cost another
/// rule re-prices (a waiter's collectives once the straggler takes its part).
pub(crate) fn severity(loop_share: f64) -> Severity {
    if loop_share >= CRITICAL_LOOP_SHARE { Severity::Critical } else { Severity::Warning }
}

/// The unexplained accounts that are the loop's own idle time (the ledger's labels).
const LOOP_IDLE: [&str; 2] = [GPU_IDLE_IN_LOOP, LOOP_WITHOUT_GPU];

impl ThreadState {
    /// The ledger's account for the GPU's idle time while the main thread was in this state.
    pub const fn account(self) -> AccountKind {
        AccountKind::MainThread(self)
    }

    /// The finding for idle time in this state.
    pub const fn finding(self) -> FindingId {
        match self {
            ThreadState::Python | ThreadState::GpuSync => FindingId::HostPython,
            ThreadState::Native => FindingId::NativeCode,
            ThreadState::CoreWait => FindingId::CoreWait,
            ThreadState::GilWait => FindingId::GilContention,
            ThreadState::Sleep => FindingId::SleepInLoop,
            ThreadState::Network => FindingId::NetworkWait,
            ThreadState::Disk => FindingId::DiskWait,
            ThreadState::Ipc => FindingId::IpcWait,
            ThreadState::Lock => FindingId::LockWait,
            ThreadState::Other => FindingId::MainThreadBlocked,
            ThreadState::PeerWait => FindingId::PeerWait,
        }
    }
}

/// Splits the loop's host-side, inferred data-wait, saturated-host and unexplained idle time by
/// the main thread's states, drops the generic findings whose time it now names (`host_bound`,
/// `process_bound`, an inferred `input_bound`), keeps `host_saturated` as a fact that claims no
/// time, and adds a finding for each part of [`MATERIAL`] size or more.
pub(crate) fn split(run: &Run, mut ledger: Ledger, out: &mut Vec<Finding>) -> Ledger {
    let Some(pid) = main_pid(run) else { return ledger };
    let pts = points(run, pid);
    let clocked = pts.iter().any(|p| p.split) || run.stacks.samples.iter().any(|s| s.pid == pid && s.clock.is_some());
    let g = crate::run::primary(run);
    let splittable = |a: &Account| {
        a.account == AccountKind::HostSide
            || a.account == AccountKind::InputInferred
            // A checkpoint's write, placed by the same samples: one cause with its pickling.
            || a.account == AccountKind::StorageWrite
            || a.account == AccountKind::HostSaturated
            || (a.account == AccountKind::Unexplained
                && (LOOP_IDLE.contains(&a.label.as_str()) || (g.is_none() && a.label == NO_LOOP)))
    };
    let total_s: f64 = ledger.accounts.iter().filter(|a| splittable(a)).map(|a| a.seconds).sum();
    if total_s <= 0.0 || pts.is_empty() {
        return ledger;
    }
    let end = ledger.wall_s;
    let (loop_s, marked) = crate::run::loop_window(run);
    let [lo, hi] = loop_s.unwrap_or([0.0, end]);
    let mut apart: Vec<[f64; 2]> = run.data_waits_s.clone();
    apart.extend(run.phases_s.iter().map(|p| p.1));
    apart.extend(run.copies_s.iter().copied());
    let apart = merged(apart, lo, hi);

    // Per stack, once: its site's frame, whether it runs in torch's own Python, and whether it
    // is inside gpulse's instrumentation (a timed wait, save or copy: measured, whatever the
    // clocks' skew at a fast loop's edges).
    // Functions are numbered as they come, by (file, name): a cause is a function.
    let mut known: HashMap<u32, Facts> = HashMap::new();
    let mut functions: HashMap<(&str, &str), u32> = HashMap::new();
    let shared = super::classifier::shared(run);
    let mut facts = |stack: u32| {
        *known.entry(stack).or_insert_with(|| {
            let place = shared.lock().unwrap_or_else(|e| e.into_inner()).place(&run.stacks, stack);
            let timed = run.stacks.frames_of(stack).any(super::classify::timed_by_gpulse);
            let site = place.site;
            let function = site.and_then(|s| run.stacks.frames.get(s as usize)).map(|f| {
                let next = functions.len() as u32;
                *functions.entry((f.file.as_str(), f.function.as_str())).or_insert(next)
            });
            // Only a line that syncs as written, or that calls torch's own read-back (a tensor
            // formatted to print), is one the job can move (a `torch.save` copies to the host
            // inside torch, and must).
            let drains = site.and_then(|s| run.stacks.frames.get(s as usize)).is_some_and(super::classify::syncs)
                || run.stacks.frames_of(stack).last().is_some_and(super::classify::torch_sync);
            // A backward pass's entry (not any autograd frame: a custom `autograd.Function` runs
            // in a forward too) or an optimizer step: a line of the training step.
            let step = run.stacks.frames_of(stack).any(super::classify::backward_entry)
                || shared.lock().unwrap_or_else(|e| e.into_inner()).domain(&run.stacks, stack)
                    == Some(Domain::Optimizer);
            Facts {
                site,
                in_torch: place.in_torch,
                timed,
                caller: place.caller,
                function,
                drains,
                call: place.call,
                step,
            }
        })
    };
    let mut parts: HashMap<Cause, Part> = HashMap::new();
    let mut drains: HashMap<u32, f64> = HashMap::new();
    // The drains through `torch.cuda.synchronize()`, however the line names it (`sync()` bound
    // to it): an explicit synchronize, not an `.item()`.
    let mut explicit: std::collections::HashSet<u32> = std::collections::HashSet::new();
    // Per line, the main thread's waits on the GPU there: its own time, not the GPU's idle time.
    let mut waits_at: HashMap<u32, f64> = HashMap::new();
    let window: Vec<&super::Point> =
        pts.iter().filter(|p| p.t_s >= lo && p.t_s <= hi && !covers(&apart, p.t_s)).collect();
    // Per line, its native and its Python time: a line whose samples are mostly native code is
    // native whole.
    let mut lines: HashMap<u32, [f64; 2]> = HashMap::new();
    // The lines under which a backward pass or an optimizer step runs: the step's own, whatever
    // library they go through (accelerate's `backward`, a trainer's `train`).
    let mut steps: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut phases = super::phase::Phases::default();
    for p in &window {
        let f = facts(p.stack);
        if let (Some(site), true) = (f.site, f.step) {
            steps.insert(site);
            phases.step(&run.stacks, p.stack, f.site);
        }
        if let (Some(site), ThreadState::Python | ThreadState::Native) = (f.site, p.class.state) {
            lines.entry(site).or_default()[usize::from(p.class.state == ThreadState::Native)] += p.dur_s;
        }
    }
    if g.is_some() {
        // Each sample once: the thread's clocks split some into a part waiting for a core.
        for p in window.iter().filter(|p| !p.split) {
            let launches =
                facts(p.stack).in_torch && matches!(p.class.state, ThreadState::Python | ThreadState::Native);
            phases.count(&run.stacks, p.stack, p.class.state == ThreadState::GpuSync, launches);
        }
    }
    let native_line = |site: Option<u32>| site.and_then(|s| lines.get(&s)).is_some_and(|[py, nat]| nat > py);
    // Where the process's other threads kept cores busy, the line with the most native time is
    // a CPU op whose intra-op pool they are (one line: a DataLoader in the process may be
    // what keeps them busy, not the forward pass beside it).
    let other_cores = other_threads_cores(run, pid, &pts, [lo, hi]);
    let cpu_op = other_cores.and_then(|_| lines.iter().max_by(|a, b| a.1[1].total_cmp(&b.1[1]).then(b.0.cmp(a.0))));
    let cpu_op = cpu_op.map(|(site, _)| *site);
    let cpu_op_line = |site: Option<u32>| site.is_some() && site == cpu_op;
    // Each sample's facts, state and cause, once: the GPU's busy time is placed by them, and
    // the idle time then goes to the causes. Recompiling inside the loop is one mechanism,
    // whether the thread traces Python, waits for its compile workers or reads their output.
    let keyed: Vec<(Facts, ThreadState, Cause)> = window
        .iter()
        .map(|p| {
            let mut f = facts(p.stack);
            // Inside a call of the job's own function beside the step (an `evaluate()`), every
            // line of it is the call's, as a library's call is.
            let phase = g.and_then(|_| phases.of(&run.stacks, p.stack));
            if let Some(c) = phase {
                f.site = Some(c.line);
                f.call = Some(c.callee);
                f.caller = c.caller;
            }
            let state = match (p.class.domain, p.class.state) {
                (Some(Domain::Compile), _) if loop_s.is_some() => ThreadState::Python,
                // Blocked on a line of native code while the process's other threads work: the
                // op waits for its intra-op pool, part of the op.
                (_, ThreadState::Other) if cpu_op_line(f.site) => ThreadState::Native,
                (_, state) => state,
            };
            // A CPU op's line is the op, whole: torch's and PIL's frames under it alike, never
            // launching (the function's launches and its other lines are other causes).
            let cause = match Cause::of(state, p.class.domain, f.function, f.in_torch, native_line(f.site)) {
                Cause::Cpu { .. } if cpu_op_line(f.site) => Cause::CpuOp,
                // Told apart from the step only where the step was seen, on a GPU.
                Cause::Cpu { launching: true, .. } if f.call.is_some() && g.is_some() && !steps.is_empty() => {
                    match f.site {
                        Some(site) if !steps.contains(&site) => Cause::Call(site),
                        _ => Cause::Cpu { function: f.function, launching: true, native: false },
                    }
                }
                cause => cause,
            };
            let cause = match (cause, phase) {
                (Cause::Cpu { .. } | Cause::CpuOp | Cause::Call(_), Some(c)) => Cause::Call(c.line),
                (cause, _) => cause,
            };
            (f, state, cause)
        })
        .collect();
    let keyed = read_back_lines(run, &window, keyed, g.is_some());
    let idle = match g {
        Some(g) => {
            let tiers = Tier::with_drains(window.iter().zip(&keyed).map(|(p, k)| {
                let tier = match (p.class.state, k.2) {
                    (_, Cause::ReadBack(_) | Cause::Call(_)) => Tier::Launch,
                    // Waiting on the GPU, or on a collective whose kernel the GPU runs meanwhile.
                    (ThreadState::GpuSync | ThreadState::PeerWait, _) => Tier::Sync,
                    // A line of native code while the process's other threads work is a CPU op.
                    (ThreadState::Native, _) if cpu_op_line(k.0.site) => Tier::Rest,
                    (_, Cause::Cpu { launching: true, .. } | Cause::Cpu { native: true, .. }) => Tier::Launch,
                    _ => Tier::Rest,
                };
                (tier, p.class.state == ThreadState::GpuSync)
            }));
            idle_weights(g, &window, &tiers)
        }
        None => vec![Some(1.0); window.len()],
    };
    let sites: Vec<Option<u32>> = keyed.iter().map(|k| k.0.site).collect();
    let first_work_s = super::begin::training_begins_s(run, &window, &sites, lo, marked);
    let mut before = 0.0;
    for ((p, idle), (facts, state, cause)) in window.into_iter().zip(idle).zip(keyed) {
        let Some(idle) = idle else { continue };
        if p.t_s < first_work_s {
            before += idle * p.dur_s;
            continue;
        }
        // Waiting on the device: the GPU works meanwhile. Where it waits tells where the GPU's
        // queue drains, so the idle time after it is the host's next work.
        if p.class.state == ThreadState::GpuSync && g.is_some() {
            if let Some(site) = facts.site.filter(|_| facts.drains) {
                *drains.entry(site).or_default() += p.dur_s;
                let leaf = run.stacks.frames_of(p.stack).last();
                if leaf.is_some_and(|f| f.function == "synchronize" && super::classify::torch_sync(f)) {
                    explicit.insert(site);
                }
            }
            if !matches!(cause, Cause::ReadBack(_)) {
                if let Some(site) = facts.site {
                    *waits_at.entry(site).or_default() += p.dur_s;
                }
                continue;
            }
        }
        let Facts { site, in_torch, timed, caller, .. } = facts;
        // Inside a wait `--instrument` timed, where the run has its marks: the measured account
        // holds it. Without them (`top` or `serve` beside a job they did not start) the wait is
        // seen through to the job's own line, or it would vanish and leave the loop to its
        // launches.
        if timed && marked {
            continue;
        }
        let part = parts.entry(cause).or_default();
        let w = idle * p.dur_s;
        part.weight += w;
        part.thread_s += p.dur_s;
        *part.modes.entry((state, p.class.domain)).or_default() += w;
        part.samples += usize::from(!p.split);
        if in_torch {
            part.in_torch += w;
        }
        if let Some(site) = site {
            *part.sites.entry(site).or_default() += w;
            if let Some(f) = run.stacks.frames.get(site as usize) {
                *part.functions.entry((f.file.clone(), f.function.clone())).or_default() += w;
            }
        }
        if let Some(c) = caller {
            *part.callers.entry(c).or_default() += w;
        }
        if let Some(c) = facts.call {
            *part.calls.entry(c).or_default() += w;
        }
        if let Some(h) = p.gil_stack {
            *part.holders.entry(h).or_default() += w;
        }
    }
    let in_loop: f64 = parts.values().map(|p| p.weight).sum();
    let weight = in_loop + before;
    let samples: usize = parts.values().map(|p| p.samples).sum();
    if samples < MIN_SAMPLES || weight <= 0.0 {
        return ledger;
    }
    // The split replaces the accounts, and the generic findings that explained them. A saturated
    // host stays a fact of the run, but the thread's own states now say what the idle time was:
    // it slows only the part in which the thread needed a core, so it no longer claims the time.
    // The host is one machine: each GPU's finding of it says so.
    let explained: Vec<(FindingId, Option<u32>)> =
        ledger.accounts.iter().filter(|a| splittable(a)).filter_map(|a| Some((a.finding?, a.finding_gpu))).collect();
    if explained.iter().any(|e| e.0 == FindingId::HostSaturated) {
        for f in out.iter_mut().filter(|f| f.id == FindingId::HostSaturated) {
            f.severity = Severity::Info;
            f.cost = None;
            f.limits.push(format!(
                "the GPU's idle time is booked by what the main thread (PID {pid}) did, from its samples; a busy host slows only the part in which the thread needed a core"
            ));
        }
    }
    out.retain(|f| f.id == FindingId::HostSaturated || !explained.contains(&(f.id, f.gpu)));
    let saturated = out.iter().any(|f| f.id == FindingId::HostSaturated);
    ledger.accounts.retain(|a| !splittable(a));
    if before > 0.0 {
        let seconds = total_s * before / weight;
        super::begin::book(run, &mut ledger, pid, seconds, [lo, first_work_s], marked);
    }
    // The loop as booked: what came before its first work is start-up.
    let loop_len = (hi - first_work_s.max(lo)).max(1e-9);
    // Where the GPU's queue drains for a cause: in the cause's own function where it waits on
    // the GPU there (a `.item()` after each small op drains it each time, whatever the loop's
    // own sync at its end), else where the main thread waited on it most.
    // A phase's waits drain its own work (an evaluation's accuracy), not the step's.
    let elsewhere: HashMap<u32, f64> =
        drains.iter().filter(|(s, _)| !phases.is_call(**s)).map(|(s, w)| (*s, *w)).collect();
    let drain_of = |part: &Part| -> Option<(String, bool)> {
        let frame = |s: u32| run.stacks.frames.get(s as usize);
        let own = drains
            .iter()
            .filter(|(s, _)| {
                frame(**s).is_some_and(|f| part.functions.contains_key(&(f.file.clone(), f.function.clone())))
            })
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(s, _)| *s);
        let at = own.or_else(|| top(&elsewhere))?;
        let f = frame(at)?;
        // An explicit synchronize is not an `.item()`: the advice differs.
        Some((f.site(), explicit.contains(&at) || f.code.as_deref().is_some_and(|c| c.contains("synchronize("))))
    };
    let mut ordered: Vec<(Cause, Part)> = parts.into_iter().collect();
    ordered.sort_by(|a, b| b.1.weight.total_cmp(&a.1.weight).then(a.0.cmp(&b.0)));
    let gpu = g.map(|g| g.gpu);
    // Draining the queue costs at most the GPU's work that could have overlapped the host's:
    // where all of it is below a finding's bar, so is the drain's fix.
    let gpu_work_s: f64 = ledger.accounts.iter().filter(|a| a.account == AccountKind::GpuWork).map(|a| a.seconds).sum();
    let overlap_matters = gpu_work_s >= MATERIAL * end;
    for (cause, part) in ordered {
        let (state, domain) = part.mode();
        // A held wait is the holder's: what the main thread was in when it came to it is no
        // part of its name.
        let domain = if matches!(cause, Cause::Held(_)) { None } else { domain };
        // Launching is one mechanism through torch's forward, backward and optimizer: the
        // phases are its evidence, not its name.
        // Native code inside torch's own ops may be CPU work on CPU tensors (`F.interpolate`
        // on an image): launching is said where torch's Python leads, or in its backward pass
        // or optimizer step, which run where the parameters are.
        // A library's call under torch's frames, on a job that uses the GPU, launches (a call
        // on CPU tensors whose intra-op pool works is a CPU op, keyed apart before).
        let launching = g.is_some()
            && match cause {
                Cause::Call(_) => true,
                Cause::Cpu { launching: true, .. } => {
                    state == ThreadState::Python || matches!(domain, Some(Domain::Backward | Domain::Optimizer))
                }
                _ => false,
            };
        let phases = launching.then(|| part.phases()).flatten();
        let optimizer = part.modes.iter().filter(|m| m.0.1 == Some(Domain::Optimizer)).map(|m| m.1).sum::<f64>()
            / part.weight.max(1e-12);
        let domain = if launching { None } else { domain };
        let mut seconds = total_s * part.weight / weight;
        // Its lines' waits on the GPU are its own time too (a tensor printed waits for the step).
        let waits_s: f64 = part.sites.keys().filter_map(|s| waits_at.get(s)).sum();
        let site = top(&part.sites).and_then(|f| run.stacks.frames.get(f as usize));
        // A wait on a lock names the thread that ran Python meanwhile where one did for a
        // fifth of it or more.
        let held_share = part.holders.values().sum::<f64>() / part.weight.max(1e-12);
        let holder = top(&part.holders)
            .filter(|_| state != ThreadState::Lock || held_share >= HOLDER_SHARE)
            .and_then(|s| site_text(&run.stacks, s));
        let recompile = domain == Some(Domain::Compile) && loop_s.is_some();
        let at = site.map(|f| f.site());
        let at_site = at.as_deref().map(|a| format!(" at {a}")).unwrap_or_default();
        // The library function a line calls, by name and package: "GenerationMixin.generate
        // (transformers)".
        let call_frame = matches!(cause, Cause::Call(_))
            .then(|| top(&part.calls).and_then(|c| run.stacks.frames.get(c as usize)))
            .flatten();
        // The job's own function beside the step (an `evaluate()`), not another library's.
        let own_call = call_frame.is_some_and(|f| super::own::own_code(&f.file));
        let call = call_frame.map(|f| match super::own::package(&f.file) {
            _ if own_call => format!("{}()", f.function),
            Some(p) => format!("{} ({p})", f.function),
            None => f.function.clone(),
        });
        // Without a GPU, torch's ops under the step's own lines (its forward, backward and
        // optimizer) are the training itself on the CPU: a fact to move, not time to win back.
        let cpu_torch = g.is_none() && matches!(cause, Cause::Cpu { launching: true, .. } | Cause::CpuOp);
        let cpu_step = cpu_torch && (steps.is_empty() || part.sites.keys().any(|s| steps.contains(s)));
        let label = if cpu_step {
            format!("the step's torch ops running on the CPU{at_site}")
        } else if let (Some(c), true) = (&call, own_call) {
            format!("the main thread in {c}, beside the training step{at_site}")
        } else if let Some(c) = &call {
            let what = if launching {
                "the main thread launching the GPU's work".to_owned()
            } else {
                label(state, domain, recompile, None)
            };
            format!("{what} in {c}{at_site}")
        } else if matches!(cause, Cause::ReadBack(_)) {
            format!("the main thread launching small ops and reading each back{at_site}")
        } else if launching {
            format!("the main thread launching the GPU's work{at_site}")
        } else {
            label(state, domain, recompile, at.as_deref())
        };
        let how = if call.is_some() && g.is_some() {
            format!(
                "the GPU's idle time inside the loop while the main thread was in the call, split by {samples} samples of the main thread (PID {pid}), and the GPU's work under the call, from the loop's GPU work"
            )
        } else if g.is_some() {
            format!(
                "the GPU's idle time inside the loop, split by {samples} samples of the main thread (PID {pid}), each weighed by the GPU's idle time in its poll (its work placed first where the thread waited on it, then where it launched)"
            )
        } else {
            format!("the job's loop time, split by {samples} samples of the main thread (PID {pid}); no GPU was read")
        };
        // A library's call runs GPU work of its own (`generate` samples token after token): the
        // GPU's time under it goes with it, out of the step's GPU work, so its cost is the time
        // the loop's own clock around it reads.
        let own_gpu_s = match call {
            // Its samples' time the GPU worked, in the ledger's seconds as its idle time is.
            Some(_) => call_gpu_work(&mut ledger, (part.thread_s + waits_s - part.weight) * total_s / weight, end),
            None => 0.0,
        };
        seconds += own_gpu_s;
        let share = seconds / end.max(1e-9);
        let id = state.finding();
        let material = share >= MATERIAL;
        let account = Account {
            account: state.account(),
            label: label.clone(),
            seconds: round(seconds, 3),
            share: round(share, 4),
            basis: Basis::Inferred,
            evidence: how,
            finding: material.then_some(id),
            finding_gpu: if material { gpu } else { None },
        };
        let cost = crate::Cost::of_accounts(&[&account], 1.0, Some(loop_len));
        ledger.accounts.push(account);
        if !material {
            continue;
        }
        let loop_share = cost.loop_share.unwrap_or(0.0);

        let waits = match g {
            _ if own_gpu_s > 0.0 => ", its GPU work included",
            Some(_) => " while the GPU waits",
            None => "",
        };
        let code = site.and_then(|f| f.code.as_deref()).map(|c| format!(" (`{c}`)")).unwrap_or_default();
        let mut title = format!("{}{code}{waits}: {{wall}} of the wall time", upper(&label));
        match (state, holder.as_deref()) {
            (ThreadState::GilWait, Some(h)) => title.push_str(&format!("; another thread holds the GIL at {h}")),
            (ThreadState::Lock, Some(h)) => title.push_str(&format!("; meanwhile another thread ran Python at {h}")),
            _ => {}
        }
        let severity = if cpu_step { Severity::Info } else { severity(loop_share) };
        // The thread's own time here, as the loop's own clock around the line reads it: what
        // of it the GPU worked through is no part of the cost.
        // Its lines' waits on the GPU are its own time too (a tensor printed waits for the step).
        let thread_share = ((part.thread_s + waits_s) / loop_len).min(1.0);
        let waits = waits_s >= part.thread_s / 3.0;
        let mut f = Finding::new(id, severity, title)
            .with("thread_loop_share", round(thread_share, 3))
            .with("state", state.as_str())
            .mechanism(upper(&label))
            .with("seconds", round(seconds, 1))
            .with("samples", part.samples as u64)
            .of_pid(pid)
            .priced(cost)
            .inferred();
        if own_gpu_s > 0.0 {
            f.limits.push(format!(
                "{:.1} s of it is the GPU running the call's own work, moved from the loop's GPU time; work queued before the call and finished under it is counted with it too",
                own_gpu_s
            ));
        } else if thread_share - loop_share >= THREAD_BEYOND_COST {
            f.limits.push(format!(
                "the main thread spent {} of the loop here by its samples, {} of it while the GPU still worked ({}): only the {} the GPU idled would go with it",
                crate::pct(thread_share),
                crate::pct(thread_share - loop_share),
                overlap_words(launching, domain, waits),
                crate::pct(loop_share)
            ));
        }
        if let Some(d) = domain {
            f.facts.domain = Some(d.as_str());
        }
        if let Some(mix) = part.states() {
            f = f.with("states", mix);
        }
        if let Some(phases) = phases {
            f = f.with("phases", phases);
        }
        if let Some(site) = site {
            f.facts.site = Some(site.site());
            // The function the line is in, all its lines together, and who called it.
            let key = (site.file.clone(), site.function.clone());
            if let Some(w) = part.functions.get(&key) {
                let line = part.sites.values().copied().fold(0.0, f64::max);
                f = f
                    .with("function", format!("{} {}", gpulse_model::stacks::short_path(&site.file), site.function))
                    .with("function_share", round(seconds * w / part.weight.max(1e-12) / end.max(1e-9), 4))
                    .with("line_share", round(seconds * line / part.weight.max(1e-12) / end.max(1e-9), 4));
            }
            if let Some(c) = top(&part.callers).and_then(|c| run.stacks.frames.get(c as usize)) {
                f = f.with("called_from", c.site());
            }
        }
        if let Some(h) = &holder {
            f = f.with("gil_holder_site", h.as_str());
        }
        if let Some(c) = &call {
            f = f.with("call", c.as_str());
        }
        // A checkpoint copies the model to the host, which waits for the GPU whatever the loop
        // does before it: an earlier drain is no part of its fix.
        // Nor for a CPU op, which runs whether the queue drains or not.
        let drain =
            drain_of(&part).filter(|_| overlap_matters && domain != Some(Domain::Checkpoint) && cause != Cause::CpuOp);
        if let Some((d, _)) = drain.as_ref().filter(|_| matches!(state, ThreadState::Python | ThreadState::Native)) {
            f = f.with("gpu_drains_at", d.as_str());
        }
        // Waiting for the DataLoader: where its workers spend their time is the line to speed up.
        let workers =
            (state == ThreadState::Ipc && domain == Some(Domain::DataLoader)).then(|| workers_site(run)).flatten();
        if let Some(w) = &workers {
            f = f.with(w.evidence_key(), w.site.as_str()).with("worker_state", w.state.as_str());
        }
        if let Some(gpu) = gpu {
            f = f.on_gpu(gpu);
        }
        if let Some(w) = loop_s {
            f = f.over(w);
        }
        let launches = g.is_some() && part.in_torch >= part.weight / 2.0;
        let cpu_cores = (state == ThreadState::Native && g.is_some() && top(&part.sites) == cpu_op)
            .then_some(other_cores)
            .flatten();
        if let Some(c) = cpu_cores {
            f = f.with("other_threads_cores", round(c, 2));
        }
        // A thread pool whose threads run Python: they take turns on the GIL, so the pool adds
        // waiting, not speed, and no lock is held too long.
        let pool_threads = state == ThreadState::Lock
            && holder.is_some()
            && top(&part.holders)
                .is_some_and(|h| run.stacks.frames_of(h).any(|f| f.file.ends_with("/concurrent/futures/thread.py")));
        // The kernel's state R is running or ready to run: on a saturated host, part of the time
        // "running" was a wait for a core, unless the thread's clocks told the two apart.
        let saturated_python = saturated && state == ThreadState::Python && !clocked;
        if saturated_python {
            f.limits.push("the host's CPU was saturated (host_saturated): the kernel shows a thread waiting for a core as running, so part of this time is that wait".to_owned());
        }
        let loader_wait = state == ThreadState::Ipc && domain == Some(Domain::DataLoader);
        f.advice = advise(&Situation {
            state,
            domain,
            recompile,
            on_gpu: g.is_some(),
            launches,
            cpu_cores,
            site,
            drain: drain.as_ref().map(|(d, explicit)| (d.as_str(), *explicit)),
            holder: holder.as_deref(),
            read_back: matches!(cause, Cause::ReadBack(_)),
            cpu_torch,
            cpu_step,
            gpus: run.gpus.len(),
            pool_threads,
            call: call.as_deref(),
            own_call,
            at_site: &at_site,
            // A quarter of the launching in the optimizer: stepping it in a few kernels is a fix
            // of its own.
            optimizer: launching && optimizer >= 0.25,
            saturated_python,
            loader_wait: loader_wait.then(|| crate::rules::workers_wait_advice(run)),
            workers: workers.map(|w| w.advice()),
        });
        out.push(f);
    }
    ledger
}

/// Moves up to `seconds` (none where it is not positive) from the loop's GPU work to a cause
/// whose GPU work it is, and says how much moved.
fn call_gpu_work(ledger: &mut Ledger, seconds: f64, wall_s: f64) -> f64 {
    let Some(a) = ledger.accounts.iter_mut().find(|a| a.account == AccountKind::GpuWork) else { return 0.0 };
    let moved = seconds.max(0.0).min(a.seconds.max(0.0));
    a.seconds = round(a.seconds - moved, 3);
    a.share = round(a.seconds / wall_s.max(1e-9), 4);
    moved
}
