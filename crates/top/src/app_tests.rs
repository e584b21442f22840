use std::sync::{Arc, Mutex};

use gpulse_live::Pipeline;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::*;
use crate::{Replay, TopSink};

fn row(pid: u32, gpu: Option<u32>, start: Option<u64>) -> Row {
    Row {
        pid,
        gpu,
        ppid: Some(1),
        gpu_mem_bytes: gpu.map(|g| u64::from(g + 1) << 30),
        start_ticks: start,
        command: Some(format!("python p{pid}")),
        ..Row::default()
    }
}

fn app(rows: Vec<Row>, no_signals: Option<&'static str>) -> App {
    let mut a = App::new(vec![DeviceInfo::default()], no_signals);
    a.rows = rows;
    a
}

fn keys(a: &mut App, s: &str) -> Action {
    let mut last = Action::None;
    for c in s.chars() {
        last = a.key(Key::Char(c));
    }
    last
}

#[test]
fn o_and_a_key_sort_and_comma_dot_step_the_column() {
    let mut a = app(vec![row(1, Some(0), None), row(2, Some(2), None), row(3, Some(1), None)], None);
    let order = |a: &App| a.shown().iter().map(|&(i, _)| a.rows[i].pid).collect::<Vec<_>>();
    assert_eq!(order(&a), [1, 3, 2], "by GPU at first");
    keys(&mut a, "om");
    assert_eq!(order(&a), [2, 3, 1], "GPU memory, largest first");
    keys(&mut a, "oM");
    assert_eq!(order(&a), [1, 3, 2], "uppercase reverses");
    keys(&mut a, "ox");
    assert!(a.message.as_deref().is_some_and(|m| m.contains("no column")));
    keys(&mut a, ",");
    assert_eq!(a.sort.column, Column::User);
    keys(&mut a, "..");
    assert_eq!(a.sort.column, Column::Sm);
}

#[test]
fn the_filter_prompt_tree_and_selection() {
    let mut a = app(vec![row(1, Some(0), None), row(2, Some(1), None), row(3, None, None)], None);
    keys(&mut a, "/gpu:1");
    assert_eq!(a.prompt, Prompt::Filter("gpu:1".into()));
    a.key(Key::Enter);
    assert_eq!(a.shown().len(), 1);
    a.key(Key::Esc);
    assert_eq!(a.shown().len(), 3, "Esc clears the filter");
    keys(&mut a, "/pid:x");
    a.key(Key::Enter);
    assert!(a.message.as_deref().is_some_and(|m| m.contains("not a PID")));
    keys(&mut a, "t");
    assert!(a.tree);
    a.key(Key::End);
    assert_eq!(a.selected, 2);
    a.key(Key::Down);
    assert_eq!(a.selected, 2, "the selection stays on the table");
    a.key(Key::Enter);
    assert_eq!(a.screen, Screen::Process(a.rows[a.shown()[2].0].pid));
    a.key(Key::Esc);
    assert_eq!(a.screen, Screen::Main);
    keys(&mut a, "?");
    assert_eq!(a.screen, Screen::Help);
    assert_eq!(keys(&mut a, "q"), Action::Quit);
}

#[test]
fn g_groups_by_pod_or_job_and_the_column_shows_only_where_one_is_known() {
    let mut plain = app(vec![row(1, Some(0), None), row(2, Some(1), None)], None);
    assert!(!screen(&plain, 120, 24).contains("POD/JOB"), "a workstation's table is unchanged");
    keys(&mut plain, "g");
    assert!(plain.group);
    assert_eq!(plain.shown().len(), 2, "with no pod nor job, grouping keeps every row");
    let with = |pid, gpu, w: Option<&str>| Row { workload: w.map(str::to_owned), ..row(pid, Some(gpu), None) };
    let mut a = app(
        vec![
            with(1, 0, Some("team-b/train-b")),
            with(2, 0, None),
            with(3, 1, Some("team-a/train-a")),
            with(4, 1, Some("team-b/train-b")),
            with(5, 2, Some("job 4711")),
        ],
        None,
    );
    let pids = |a: &App| a.shown().iter().map(|&(i, _)| a.rows[i].pid).collect::<Vec<_>>();
    assert_eq!(pids(&a), [1, 2, 3, 4, 5]);
    keys(&mut a, "g");
    assert_eq!(pids(&a), [5, 3, 1, 4, 2], "job 4711 < team-a < team-b, none last");
    keys(&mut a, "om");
    assert_eq!(pids(&a), [5, 3, 4, 1, 2], "within a group, the sort holds (GPU memory)");
    let s = screen(&a, 120, 24);
    assert!(s.contains("POD/JOB") && s.contains("team-a/train-a") && s.contains("by pod/job"), "{s}");
    keys(&mut a, "g");
    assert_eq!(pids(&a), [5, 3, 4, 1, 2], "ungrouped, by GPU memory again");
}

#[test]
fn a_signal_waits_for_y_and_goes_to_the_tagged_processes_only() {
    let mut a = app(vec![row(10, Some(0), Some(111)), row(20, Some(0), Some(222)), row(30, None, Some(333))], None);
    a.key(Key::Char(' '));
    a.key(Key::Down);
    a.key(Key::Char(' '));
    assert_eq!(a.tagged.iter().copied().collect::<Vec<_>>(), [10, 30]);
    assert_eq!(keys(&mut a, "T"), Action::None, "nothing is sent before the confirmation");
    assert!(matches!(&a.prompt, Prompt::Confirm(Signal::Term, t) if t.len() == 2));
    assert_eq!(keys(&mut a, "n"), Action::None, "any other key cancels");
    assert_eq!(a.prompt, Prompt::None);
    keys(&mut a, "K");
    let sent = keys(&mut a, "y");
    let expect = vec![
        Target { pid: 10, start_ticks: 111, label: "python p10".into() },
        Target { pid: 30, start_ticks: 333, label: "python p30".into() },
    ];
    assert_eq!(sent, Action::Signal(Signal::Kill, expect), "with the start times they were shown with");
    assert!(a.tagged.is_empty());
}

#[test]
fn no_signal_under_readonly_nor_to_a_process_of_a_recording() {
    let mut a = app(vec![row(10, Some(0), Some(1))], Some("--readonly"));
    keys(&mut a, "K");
    assert_eq!(a.prompt, Prompt::None);
    assert!(a.message.as_deref().is_some_and(|m| m.contains("--readonly")));
    let mut a = app(vec![row(10, Some(0), None)], None);
    keys(&mut a, "I");
    assert!(a.message.as_deref().is_some_and(|m| m.contains("not a process of this machine")), "{:?}", a.message);
    assert_eq!((keys(&mut a, "y"), &a.prompt), (Action::None, &Prompt::None));
}

/// A real recording, replayed through the pipeline into the view and drawn at 80×24 and 200×60.
pub(super) fn replayed(name: &str) -> Arc<Mutex<App>> {
    replayed_until(name, |_| false)
}

/// Replayed up to the first poll for which `until` holds.
fn replayed_until(name: &str, until: impl Fn(&Poll) -> bool) -> Arc<Mutex<App>> {
    let p = gpulse_fixtures::path("h200-gpulse-run").join(name);
    replay_run(&gpulse_record::read(&p).unwrap(), until)
}

/// Any run (a recording, a log) replayed through the pipeline into the view.
pub(super) fn replay_run(run: &gpulse_record::Recording, until: impl Fn(&Poll) -> bool) -> Arc<Mutex<App>> {
    let instrumented = run.instrumented();
    let app = Arc::new(Mutex::new(App::new(run.devices.clone(), Some("a replay"))));
    app.lock().unwrap().replay = Some("replay".into());
    let follow = run.meta_value(gpulse_model::MetaKey::RootPid).is_none();
    let mut pipeline = Pipeline::new(None, Some(crate::rolling_diagnosis(&run.devices, instrumented, follow)));
    pipeline.add_sink(Box::new(TopSink::new(app.clone(), false)));
    let mut r = Replay::analysed(run, 1.0);
    let mut recorded = r.take_recorded();
    let now = std::time::Instant::now();
    while let Some(poll) = r.due(now, true) {
        pipeline.marks(recorded.marks_due(poll.host.timestamp_us));
        let last = until(&poll);
        pipeline.poll(poll);
        if last {
            break;
        }
    }
    app
}

pub(super) fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| crate::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>().trim_end().to_owned() + "\n")
        .collect()
}

#[test]
fn the_dataloader_bound_run_shows_its_gpu_processes_pace_and_finding() {
    let app = replayed("dl_bound.db");
    let a = app.lock().unwrap();
    for (w, h) in [(80, 24), (200, 60)] {
        let s = screen(&a, w, h);
        assert!(s.contains("H200"), "{s}");
        assert!(s.contains("input_bound"), "the live diagnosis found the DataLoader:\n{s}");
        assert!(s.contains("steps/s"), "{s}");
        let pid = a.rows.iter().find(|r| r.gpu.is_some()).map(|r| r.pid).expect("a GPU process");
        assert!(s.contains(&pid.to_string()), "{s}");
        assert!(!s.contains("0.0 GB/s"), "no throughput made up");
    }
    assert!(a.steps_per_s.is_some() && a.data_wait_share.is_some());
}

#[test]
fn dataloader_workers_are_listed_and_hang_under_the_trainer() {
    let app = replayed_until("dl_tuned.db", |p| p.tree.as_ref().is_some_and(|t| t.processes.len() > 4));
    let mut a = app.lock().unwrap();
    assert!(a.rows.iter().any(|r| r.gpu.is_none()), "the CPU-only processes of the tree are listed");
    a.key(Key::Char('t'));
    assert!(a.shown().iter().any(|&(_, depth)| depth > 0), "the tree has depth");
}

#[test]
fn the_leak_shows_its_oom_forecast() {
    let app = replayed("leak.db");
    let a = app.lock().unwrap();
    let s = screen(&a, 120, 40);
    assert!(a.findings.iter().any(|f| f.time_to_oom_s.is_some()), "{:?}", a.findings);
    assert!(s.contains("OOM in"), "{s}");
    assert!(a.trend_gib_per_min[0].is_some_and(|t| t > 0.0));
}

#[test]
fn eight_gpus_fit_at_80x24_and_use_200x60() {
    let devices: Vec<DeviceInfo> =
        (0..8).map(|index| DeviceInfo { index, name: "NVIDIA H200".into(), ..Default::default() }).collect();
    let mut a = App::new(devices, None);
    let gpus =
        (0..8).map(|i| gpulse_model::GpuSample { gpu_index: i, util_gpu_pct: Some(10 * i), ..Default::default() });
    let poll =
        Poll { snapshot: Some(gpulse_model::Snapshot { timestamp_us: 1, gpus: gpus.collect() }), ..Poll::default() };
    a.apply(&Frame { poll: &poll, rolling: None, findings: &[] }, &HashMap::new());
    let small = screen(&a, 80, 24);
    assert!((0..8).all(|i| small.contains(&format!("\n{i:<9}H200"))), "{small}");
    assert!(small.contains("UTL  70%"), "{small}");
    let big = screen(&a, 200, 60);
    assert!(big.contains("throttle: —"), "the full layout at 200×60:\n{big}");
    assert!(!big.contains("0 MHz"), "an absent clock is not 0");
    // Eight busy GPUs with a rank each, every field read, kept as snapshots.
    let gib = 1u64 << 30;
    let gpus = (0..8).map(|i| gpulse_model::GpuSample {
        gpu_index: i,
        util_gpu_pct: Some(60 + 5 * i),
        memory_used_bytes: Some(u64::from(10 + 15 * i) * gib),
        memory_total_bytes: Some(143_771 << 20),
        power_draw_mw: Some(300_000 + 50_000 * i),
        power_limit_mw: Some(700_000),
        temperature_gpu_c: Some(40 + 3 * i),
        clock_sm_mhz: Some(1980),
        clock_mem_mhz: Some(3201),
        clocks_event_reasons: Some(if i == 7 { 0x4 } else { 0 }),
        pcie_tx_bytes_per_s: Some(u64::from(i) * 1_000_000_000),
        pcie_rx_bytes_per_s: Some(u64::from(i) * 2_000_000_000),
        processes: vec![gpulse_model::ProcessSample {
            pid: 4000 + i,
            used_memory_bytes: Some(u64::from(9 + 15 * i) * gib),
            sm_util_pct: Some(50 + 5 * i),
            mem_util_pct: Some(20 + i),
            cmdline: Some(format!("python train.py --local-rank {i}")),
            ..Default::default()
        }],
        ..Default::default()
    });
    let poll =
        Poll { snapshot: Some(gpulse_model::Snapshot { timestamp_us: 2, gpus: gpus.collect() }), ..Poll::default() };
    a.apply(&Frame { poll: &poll, rolling: None, findings: &[] }, &HashMap::new());
    let small = screen(&a, 80, 24);
    assert!(small.contains("PWR 650/700W 61°C"), "GPU 7, one line:\n{small}");
    insta::assert_snapshot!("eight_gpus_80x24", small);
    let big = screen(&a, 200, 60);
    assert!((0..8).all(|i| big.contains(&format!("python train.py --local-rank {i}"))), "every rank:\n{big}");
    assert!(big.contains("throttle: power cap"), "GPU 7's reason in words:\n{big}");
    insta::assert_snapshot!("eight_gpus_200x60", big);
}

#[test]
fn a_watched_job_shows_its_pace_and_its_leading_finding_with_the_forecast() {
    use gpulse_live::jobs::{JobFinding, JobStatus};
    let mut a = App::new(vec![DeviceInfo { index: 0, name: "NVIDIA H200".into(), ..Default::default() }], None);
    a.jobs = vec![JobStatus {
        gpulse_pid: 10,
        gpulse_start_ticks: 1,
        pid: 4242,
        command: "python3 train.py\n  --epochs 3".into(),
        recording: None,
        instrumented: true,
        updated_unix_ms: 0,
        steps_per_s: Some(21.25),
        data_wait_share: Some(0.72),
        leading: Some(JobFinding {
            id: "memory_leak".into(),
            title: "GPU memory grows without bound".into(),
            gpu: Some(0),
            lost_share: None,
            time_to_oom_s: Some(600.0),
        }),
        main_thread: Some(gpulse_live::jobs::MainThreadNow {
            pid: 4242,
            rank: None,
            state: "sleep".into(),
            site: Some("w/train.py:60 train\x1b[2J".into()),
            shares: vec![("sleep".into(), 0.62), ("python".into(), 0.3), ("gpu_sync".into(), 0.08)],
        }),
    }];
    let s = screen(&a, 200, 40);
    let line = s.lines().find(|l| l.contains("job 4242")).unwrap_or_else(|| panic!("{s}"));
    assert!(line.contains(r"main sleep w/train.py:60 train\x1b[2J (sleep 62%, python 30%)"), "{line}");
    assert!(line.contains("21.25 steps/s") && line.contains("data wait 72%"), "{line}");
    assert!(line.contains("memory_leak (OOM in 10m") && line.contains("grows without bound"), "{line}");
    assert!(line.contains("python3 train.py --epochs 3"), "the command on one line: {line}");
    assert!(s.contains("1 job watched"), "{s}");
    // A cost beside a title that gives the loop's share says its own basis: two numbers, each
    // with what it is a share of.
    a.jobs[0].leading = Some(JobFinding {
        id: "input_bound".into(),
        title: "The loop waits for data 85% of the loop's time".into(),
        gpu: None,
        lost_share: Some(0.4827),
        time_to_oom_s: None,
    });
    let s = screen(&a, 200, 40);
    let line = s.lines().find(|l| l.contains("job 4242")).unwrap_or_else(|| panic!("{s}"));
    assert!(line.contains("input_bound 48% of the wall: The loop waits for data 85% of the loop's time"), "{line}");
    // The job's process and its worker are of a watched tree; another process is not.
    use crate::rows::Row;
    a.rows = vec![
        Row { pid: 4242, gpu: Some(0), ..Row::default() },
        Row { pid: 4250, ppid: Some(4242), ..Row::default() },
        Row { pid: 77, ppid: Some(1), gpu: Some(0), ..Row::default() },
    ];
    a.mark_jobs();
    let classes: Vec<_> = a.rows.iter().map(|r| r.class).collect();
    use gpulse_model::GpuProcessClass::Tree;
    assert_eq!(classes, [Some(Tree), Some(Tree), None]);
}

/// The shared fixtures' nvidia-smi log of a loop that stalls 3 s every ~11 s (its README).
pub(super) fn stall_log() -> gpulse_record::Recording {
    let p = gpulse_fixtures::path("h200-2026-11-29/rich_stall.csv");
    gpulse_input::load(&p).unwrap()
}

#[test]
fn the_periodic_stall_is_found_live_with_its_cost() {
    let app = replay_run(&stall_log(), |_| false);
    let a = app.lock().unwrap();
    let stall = a
        .findings
        .iter()
        .find(|f| f.id == gpulse_diagnose::FindingId::PeriodicStall)
        .unwrap_or_else(|| panic!("{:?}", a.findings));
    // 3 s idle in every ~11 s: the log holds two such pauses, 6 s of its 42.6 s, and the view
    // gives the ledger's share of the wall time as every other view does.
    let lost = stall.lost_share.unwrap();
    assert!((0.12..=0.17).contains(&lost), "{lost}");
    let s = screen(&a, 120, 40);
    assert!(s.contains("periodic_stall"), "{s}");
}

/// Frames of real H200 runs, kept as snapshots: a change to the layout shows in review. Each is
/// also checked above against what the run was.
#[test]
fn frames_of_real_runs_at_80x24_and_200x60() {
    // Idle: the DataLoader-bound run's first poll, before the script reached CUDA.
    let idle = replayed_until("dl_bound.db", |_| true);
    let dl = replayed("dl_bound.db");
    let leak = replayed("leak.db");
    let stall = replay_run(&stall_log(), |_| false);
    for (name, app) in [("idle", idle), ("dl_bound", dl), ("leak", leak), ("stall", stall)] {
        let a = app.lock().unwrap();
        for (w, h) in [(80, 24), (200, 60)] {
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(&a, w, h));
        }
    }
}

/// The host's swap: its share with the amounts where there are three lines, its share beside
/// memory at 80×24, `none` on a machine without swap and `—` where it was not read.
#[test]
fn swap_is_shown_as_read_and_absent_as_absent() {
    let show = |used: Option<u64>, total: Option<u64>| {
        let mut a = App::new(vec![DeviceInfo::default()], None);
        let host = gpulse_model::HostSample {
            swap_used_bytes: used,
            swap_total_bytes: total,
            memory_used_bytes: Some(4 << 30),
            memory_total_bytes: Some(16 << 30),
            ..Default::default()
        };
        let poll = Poll { host, ..Poll::default() };
        a.apply(&gpulse_live::Frame { poll: &poll, rolling: None, findings: &[] }, &HashMap::new());
        (screen(&a, 200, 60), screen(&a, 80, 24), a.host_swap_pct.last_n(1).next().flatten())
    };
    let (big, small, pct) = show(Some(2 << 30), Some(8 << 30));
    assert!(big.contains("SWP  25.0% 2.0/8.0 GiB"), "{big}");
    assert!(small.contains("MEM  25.0% 4.0/16.0 GiB SWP 25.0%"), "{small}");
    assert_eq!(pct, Some(25.0));
    let (big, small, pct) = show(Some(0), Some(0));
    assert!(big.contains("SWP   none") && small.contains("SWP none"), "{big}{small}");
    assert_eq!(pct, Some(0.0), "no swap is none in use");
    let (big, small, pct) = show(None, None);
    assert!(big.contains("SWP      —") && small.contains("SWP —"), "{big}{small}");
    assert_eq!(pct, None, "unread is a gap in the history, not 0");
}

/// Two real jobs one after the other on GPU 0, as `top` sees a machine: the DataLoader-bound
/// run, then the tuned one (another PID). Once the second has run its warm-up, what `top` says of
/// GPU 0 is what the second job alone gives, not a blend with the first.
#[test]
fn a_new_job_on_a_gpu_is_diagnosed_on_its_own() {
    let read = |n: &str| {
        let p = gpulse_fixtures::path("h200-gpulse-run").join(n);
        gpulse_record::read(&p).unwrap()
    };
    let (first, second) = (read("dl_bound.db"), read("dl_tuned.db"));
    let shift = first.snapshots.last().unwrap().timestamp_us + 2_000_000 - second.snapshots[0].timestamp_us;
    let second_start = second.snapshots[0].timestamp_us + shift;
    let feed = |live: &mut RollingDiagnosis,
                run: &gpulse_record::Recording,
                dt: i64,
                mut each: Box<dyn FnMut(&RollingDiagnosis) + '_>| {
        let mut r = Replay::analysed(run, 1.0);
        let now = std::time::Instant::now();
        while let Some(mut poll) = r.due(now, true) {
            poll.host.timestamp_us += dt;
            if let Some(s) = poll.snapshot.as_mut() {
                s.timestamp_us += dt;
            }
            live.push_poll(poll);
            live.update();
            each(live);
        }
    };
    let found = |live: &RollingDiagnosis| -> Vec<(gpulse_diagnose::FindingId, Option<u32>)> {
        live.current().iter().map(|f| (f.id, f.gpu)).collect()
    };
    let mut alone = crate::rolling_diagnosis(&second.devices, false, true);
    feed(&mut alone, &second, 0, Box::new(|_| {}));
    assert!(!alone.current().is_empty());
    // A diagnosis that does not follow workloads blends the two jobs.
    let mut blended = RollingDiagnosis::new(&first.devices, false);
    feed(&mut blended, &first, 0, Box::new(|_| {}));
    feed(&mut blended, &second, shift, Box::new(|_| {}));
    assert_ne!(found(&blended), found(&alone), "the first job still shows");
    // top's: nothing of GPU 0 during the second job's warm-up, then the second job's findings.
    let mut live = crate::rolling_diagnosis(&first.devices, false, true);
    feed(&mut live, &first, 0, Box::new(|_| {}));
    let before = found(&live);
    assert!(before.iter().any(|f| f.1 == Some(0)), "{before:?}");
    feed(
        &mut live,
        &second,
        shift,
        Box::new(|l| {
            let t = l.window().host.last().unwrap().timestamp_us;
            if t > second_start + 1_000_000 && t - second_start < 30_000_000 {
                assert!(found(l).iter().all(|f| f.1 != Some(0)), "warming up: {:?}", found(l));
            }
        }),
    );
    assert_eq!(found(&live), found(&alone));
    // Its own measure, over its GPU's active window: the machine's wall holds the first job too.
    let share = |l: &RollingDiagnosis| l.current()[0].own_share().unwrap_or(0.0);
    assert!((share(&live) - share(&alone)).abs() < 0.05, "{} against {}", share(&live), share(&alone));
}

/// The shared fixtures' healthy run with its apps log: PID 1250 allocated 20 GiB at the start
/// and slept (their README), the training beside it is PID 1557. The table says which is idle.
#[test]
fn a_process_that_holds_memory_and_does_nothing_is_idle() {
    let dir = gpulse_fixtures::path("h200-2026-11-29");
    let out = std::env::temp_dir().join(format!("gpulse-top-idle-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&out);
    gpulse_input::import_logs(&[dir.join("rich_healthy.csv"), dir.join("apps_healthy.csv")], None, &out).unwrap();
    let run = gpulse_record::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    // Up to the training's last listing, when both are on the GPU.
    let last = run
        .snapshots
        .iter()
        .filter(|s| s.gpus.iter().any(|g| g.processes.iter().any(|p| p.pid == 1557)))
        .map(|s| s.timestamp_us)
        .max()
        .unwrap();
    let app = replay_run(&run, |p| p.host.timestamp_us >= last);
    let a = app.lock().unwrap();
    let class =
        |pid: u32| a.rows.iter().find(|r| r.pid == pid).map(|r| crate::draw_table::cells(r, 0, false)[10].clone());
    assert_eq!(class(1250).as_deref(), Some("idle"), "{:?}", a.findings.iter().map(|f| f.id).collect::<Vec<_>>());
    assert!(class(1557).is_some_and(|c| c != "idle"), "the training is listed, and busy: {:?}", class(1557));
    let s = screen(&a, 200, 60);
    let row = s.lines().find(|l| l.split_whitespace().nth(1) == Some("1250")).unwrap();
    assert!(row.contains(" idle "), "{row}");
}

#[test]
fn nvlink_shows_on_a_gpu_with_links_and_not_on_one_without() {
    let devices: Vec<DeviceInfo> =
        (0..2).map(|index| DeviceInfo { index, name: "NVIDIA H200".into(), ..Default::default() }).collect();
    let mut a = App::new(devices, None);
    // GPM answers 0 B/s of NVLink on both; only GPU 1 has links (idle ones).
    let gpm = gpulse_model::GpmMetrics {
        nvlink_tx_bytes_per_s: Some(0.0),
        nvlink_rx_bytes_per_s: Some(0.0),
        ..Default::default()
    };
    let gpus = (0..2).map(|i| gpulse_model::GpuSample {
        gpu_index: i,
        gpm: Some(Box::new(gpm.clone())),
        nvlinks: if i == 1 {
            vec![gpulse_model::NvLink { link: 0, active: true, ..Default::default() }]
        } else {
            vec![]
        },
        ..Default::default()
    });
    let poll =
        Poll { snapshot: Some(gpulse_model::Snapshot { timestamp_us: 1, gpus: gpus.collect() }), ..Poll::default() };
    a.apply(&Frame { poll: &poll, rolling: None, findings: &[] }, &HashMap::new());
    let s = screen(&a, 200, 60);
    assert_eq!(s.matches("NVLink ↑0.0 MiB/s").count(), 1, "GPU 1 alone:\n{s}");
}

/// The panel tells a diagnosis that has not begun from one that never will (a replay that ended
/// inside the warm-up) and from one that found nothing.
#[test]
fn the_why_panel_says_whether_the_diagnosis_waits_ended_or_found_nothing() {
    // The energy run lasted 25 s: a replay of it ends before the live diagnosis' 30 s warm-up.
    let p = gpulse_fixtures::path("h200-energy/energy_short.db");
    let app = replay_run(&gpulse_record::read(&p).unwrap(), |_| false);
    let mut a = app.lock().unwrap();
    let times: Vec<f64> = a.times_s.last_n(a.times_s.len()).flatten().collect();
    let span_s = times.last().unwrap() - times.first().unwrap();
    assert!(span_s < 30.0 && !a.diagnosed && a.findings.is_empty(), "{span_s} s");
    assert!(screen(&a, 200, 60).contains("starts after 30 s"), "while it plays, it waits");
    a.replay_ended = true;
    let s = screen(&a, 200, 60);
    assert!(!s.contains("starts after 30 s"), "{s}");
    assert!(s.contains("ended before 30 s") && s.contains("gpulse diagnose FILE"), "{s}");
    // Diagnosed, with nothing found: not a wait.
    let mut idle = App::new(vec![DeviceInfo::default()], None);
    idle.diagnosed = true;
    let s = screen(&idle, 200, 60);
    assert!(s.contains("nothing found") && !s.contains("starts after 30 s"), "{s}");
}

/// The main thread of a replay's recording, where no watched job shows one: its state now, its
/// site escaped, and its states' shares.
#[test]
fn a_replayed_main_thread_is_shown_with_its_site_escaped() {
    let mut a = App::new(vec![DeviceInfo { index: 0, name: "NVIDIA H200".into(), ..Default::default() }], None);
    a.main_thread = Some(gpulse_live::jobs::MainThreadNow {
        pid: 4243,
        rank: Some(2),
        state: "network".into(),
        site: Some("w/fetch.py:88 get\x1b[2J".into()),
        shares: vec![("network".into(), 0.41), ("python".into(), 0.5)],
    });
    let s = screen(&a, 160, 40);
    let line = s.lines().find(|l| l.contains("main thread 4243")).unwrap_or_else(|| panic!("{s}"));
    assert!(line.contains(r"rank 2: network w/fetch.py:88 get\x1b[2J (network 41%, python 50%)"), "{line}");
}

/// Of the whole machine, each GPU process's main thread has a line; a worker's, which holds no
/// GPU, has none.
#[test]
fn every_gpu_processs_main_thread_has_a_line() {
    let mut a = app(vec![row(10, Some(0), None), row(11, Some(1), None), row(99, None, None)], None);
    let m = |pid: u32, state: &str, site: &str| gpulse_live::jobs::MainThreadNow {
        pid,
        rank: None,
        state: state.into(),
        site: Some(site.into()),
        shares: vec![(state.into(), 0.9)],
    };
    a.main_thread = Some(m(10, "sleep", "a.py:3 <module>"));
    a.main_threads =
        vec![m(10, "sleep", "a.py:3 <module>"), m(99, "python", "w.py:1 f"), m(11, "python", "b.py:4 spin")];
    let s = screen(&a, 160, 40);
    let line = |pid: u32| s.lines().find(|l| l.contains(&format!("main thread {pid} "))).map(str::to_owned);
    assert!(line(10).is_some_and(|l| l.contains("sleep a.py:3 <module> (sleep 90%)")), "{s}");
    assert!(line(11).is_some_and(|l| l.contains("python b.py:4 spin")), "{s}");
    assert!(line(99).is_none(), "{s}");
    assert_eq!(s.matches("main thread 10 ").count(), 1, "{s}");
}
