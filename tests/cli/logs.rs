//! nvidia-smi logs through `import`, `export`, `diagnose` and `report`: every way nvidia-smi
//! writes a log comes back byte for byte, unreadable lines are reported by every command that
//! reads a log, and no input makes gpulse panic. The truth is the real H200 logs' own bytes.

use std::path::{Path, PathBuf};

use super::support::*;

const SCENARIOS: [&str; 6] = ["dl_bound", "dl_tuned", "leak", "tiny", "healthy", "stall"];
/// The --query-gpu lists the fixtures were logged with (tests/fixtures/h200-2026-11-29/README.md).
const RICH_FIELDS: &str = "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,pstate,clocks_event_reasons.active,pcie.link.gen.current,fan.speed";
const SEED_FIELDS: &str = "timestamp,utilization.gpu,memory.used";
const APPS_FIELDS: &str = "timestamp,gpu_uuid,pid,process_name,used_memory";

fn tmp(name: &str) -> super::support::Temp {
    fresh_dir("logs", name)
}

fn real(name: &str) -> String {
    std::fs::read_to_string(fixture(&format!("h200-2026-11-29/{name}.csv"))).unwrap()
}

/// Imports `logs` (with `extra` arguments) into a fresh recording in `dir` and returns it.
fn import(dir: &Path, name: &str, logs: &[&Path], extra: &[&str]) -> PathBuf {
    let db = dir.join(format!("{name}.db"));
    let (code, _, err) = run(gpulse(None).arg("import").args(logs).args(extra).arg("-o").arg(&db));
    assert_eq!(code, 0, "{name}: {err}");
    db
}

/// What `gpulse export FILE ARGS` writes.
fn export(file: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(gpulse(None).arg("export").arg(file).args(args));
    assert_eq!(code, 0, "{}: {err}", file.display());
    out
}

/// `log` without its units, as `--format=csv,nounits` writes values (headers keep theirs).
fn without_units(log: &str) -> String {
    let mut out = String::new();
    for (i, line) in log.lines().enumerate() {
        let cells: Vec<String> = cells(line)
            .into_iter()
            .map(|c| {
                let unit = [" %", " MiB", " W", " MHz"].into_iter().find(|u| c.ends_with(u));
                if i == 0 { c.to_owned() } else { unit.map_or(c, |u| &c[..c.len() - u.len()]).to_owned() }
            })
            .collect();
        out += &cells.join(", ");
        out.push('\n');
    }
    out
}

#[test]
fn headerless_logs_export_with_their_own_fields_and_format() {
    let dir = tmp("noheader");
    for s in SCENARIOS {
        for (kind, fields) in [("rich", RICH_FIELDS), ("seed", SEED_FIELDS), ("apps", APPS_FIELDS)] {
            let log = real(&format!("{kind}_{s}"));
            // `noheader`, and `noheader,nounits`: the header line dropped, then the units too.
            let body = log.split_once('\n').unwrap().1.to_owned();
            let bare = without_units(&log).split_once('\n').unwrap().1.to_owned();
            for (form, text) in [("noheader", body), ("noheader,nounits", bare)] {
                let name = format!("{kind}_{s}_{}", form.replace(',', "_"));
                let path = dir.join(format!("{name}.csv"));
                std::fs::write(&path, &text).unwrap();
                let db = import(&dir, &name, &[&path], &["--fields", fields]);
                assert_eq!(export(&db, &[]), text, "{name}");
            }
        }
    }
    // Asked for, a header goes back on top, with nvidia-smi's own names for the aliases.
    let db = dir.join("rich_leak_noheader.db");
    let first = export(&db, &["--format=csv"]).lines().next().unwrap().to_owned();
    assert_eq!(first, real("rich_leak").lines().next().unwrap());
}

#[test]
fn logs_appended_across_restarts_keep_their_headers() {
    let dir = tmp("appended");
    for s in SCENARIOS {
        for kind in ["rich", "seed", "apps"] {
            let log = real(&format!("{kind}_{s}"));
            let lines: Vec<&str> = log.lines().collect();
            let header = lines[0];
            // `nvidia-smi -f` appends: each restart writes its header again, the last one with no
            // rows after it yet; and a log in nounits keeps its headers as they are.
            let third = lines.len() / 3;
            let mut appended: Vec<&str> = lines[..third].to_vec();
            appended.push(header);
            appended.extend(&lines[third..2 * third]);
            appended.extend([header, header]);
            appended.extend(&lines[2 * third..]);
            appended.push(header);
            let appended = appended.join("\n") + "\n";
            for (form, text) in [("csv", appended.clone()), ("csv,nounits", without_units(&appended))] {
                let name = format!("{kind}_{s}_{}", form.replace(',', "_"));
                let path = dir.join(format!("{name}.csv"));
                std::fs::write(&path, &text).unwrap();
                assert_eq!(text.matches(header).count(), 5);
                let db = import(&dir, &name, &[&path], &[]);
                assert_eq!(export(&db, &[]), text, "{name}");
                assert_eq!(export(&path, &[]), text, "{name}, read directly");
            }
        }
    }
}

#[test]
fn compute_apps_logs_export_back_byte_for_byte() {
    let dir = tmp("apps");
    for s in SCENARIOS {
        let apps_path = fixture(&format!("h200-2026-11-29/apps_{s}.csv"));
        let rich_path = fixture(&format!("h200-2026-11-29/rich_{s}.csv"));
        let apps = real(&format!("apps_{s}"));
        // Alone: a recording of a compute-apps log exports as one.
        let db = import(&dir, &format!("apps_{s}"), &[&apps_path], &[]);
        assert_eq!(export(&db, &[]), apps, "{s}");
        assert_eq!(export(&db, &["--query-compute-apps"]), apps, "{s}");
        assert_eq!(export(&apps_path, &[]), apps, "{s}, read directly");
        // Beside its GPU log: each comes back on its own.
        let both = import(&dir, &format!("both_{s}"), &[&rich_path, &apps_path], &[]);
        assert_eq!(export(&both, &[]), real(&format!("rich_{s}")), "{s}");
        assert_eq!(export(&both, &["--query-compute-apps"]), apps, "{s}");
        // Other fields and formats, against the log's own cells.
        let want: String = apps
            .lines()
            .skip(1)
            .map(|l| {
                let c = cells(l);
                format!("{}, {}\n", c[2], c[4].trim_end_matches(" MiB"))
            })
            .collect();
        assert_eq!(export(&db, &["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]), want);
    }
    let (code, _, err) =
        run(gpulse(None).arg("export").arg(dir.join("apps_leak.db")).arg("--query-compute-apps=bogus"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Field \"bogus\" is not a valid field to query."), "{err}");
}

/// `rich_stall.csv` with junk on lines 4, 9 and 12.
fn log_with_junk(dir: &Path) -> (PathBuf, usize) {
    let mut lines: Vec<String> = real("rich_stall").lines().map(str::to_owned).collect();
    let rows = lines.len() - 1;
    for at in [4, 9, 12] {
        lines.insert(at - 1, "2026/11/29 14:50:00.000, 0, cut".into());
    }
    let path = dir.join("junk.csv");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (path, rows)
}

#[test]
fn every_command_that_reads_a_log_warns_about_its_malformed_lines() {
    let dir = tmp("malformed");
    let (log, rows) = log_with_junk(&dir);
    let warning = format!("gpulse: warning: 3 malformed lines in {} skipped (lines 4, 9, 12)", log.display());
    let (db, html, other) = (dir.join("j.db"), dir.join("r.html"), fixture("h200-2026-11-29/rich_healthy.csv"));
    let commands: [(&str, Vec<&Path>); 5] = [
        ("import", vec![&log, Path::new("-o"), &db]),
        ("diagnose", vec![&log]),
        ("export", vec![&log]),
        ("report", vec![&log, Path::new("-o"), &html]),
        ("compare", vec![&log, &other]),
    ];
    for (command, args) in commands {
        let (code, out, err) = run(gpulse(None).arg(command).args(args));
        assert_eq!(code, 0, "{command}: {err}");
        assert_eq!(err.lines().filter(|l| *l == warning).count(), 1, "{command}: {err}");
        assert!(!out.contains("malformed line"), "{command}: the warning stays off standard output");
        if command == "export" {
            assert_eq!(out, real("rich_stall"), "the rows that could be read are all there");
        }
        if command == "import" {
            assert!(err.contains(&format!("imported {rows} GPU samples of 1 GPU")), "{err}");
            assert!(err.contains(&format!("{}:9: 3 cells where the header has 17", log.display())), "{err}");
        }
    }
    // More than five: the first five, then an ellipsis.
    let mut text = real("seed_tiny");
    text += &"junk\n".repeat(7);
    let many = dir.join("many.csv");
    std::fs::write(&many, &text).unwrap();
    let first = real("seed_tiny").lines().count() + 1;
    let at: Vec<String> = (first..first + 5).map(|l| l.to_string()).collect();
    let (code, _, err) = run(gpulse(None).arg("diagnose").arg(&many));
    assert_eq!(code, 0, "{err}");
    let want = format!("gpulse: warning: 7 malformed lines in {} skipped (lines {}, …)", many.display(), at.join(", "));
    assert!(err.lines().any(|l| l == want), "{err}");
    // A clean log: no warning at all.
    let (_, _, err) = run(gpulse(None).arg("diagnose").arg(fixture("h200-2026-11-29/rich_stall.csv")));
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn a_compute_apps_log_alone_is_named_for_what_it_holds() {
    let dir = tmp("apps_only");
    let apps_path = fixture("h200-2026-11-29/apps_leak.csv");
    let rows = real("apps_leak").lines().count() - 1;
    let db = dir.join("apps.db");
    let (code, _, err) = run(gpulse(None).arg("import").arg(&apps_path).arg("-o").arg(&db));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(&format!("imported {rows} process rows of 1 GPU")), "{err}");
    assert!(err.contains("no GPU samples"), "{err}");
    for input in [db.as_path(), apps_path.as_path()] {
        let (code, out, err) = run(gpulse(None).arg("diagnose").arg(input));
        assert_eq!((code, out.as_str()), (1, ""), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("no GPU samples") && err.contains("--query-compute-apps"), "{err}");
        assert!(err.contains("--query-gpu") && err.contains("gpulse import"), "says what to pass instead: {err}");
    }
    // Together with the run's GPU log, the same processes are diagnosed.
    let both = import(&dir, "both", &[&fixture("h200-2026-11-29/rich_leak.csv"), &apps_path], &[]);
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(&both));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"oom\""), "{out}");
}

/// A small deterministic generator, so the hostile files are the same every run.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn hostile_logs_never_make_gpulse_panic() {
    let dir = tmp("hostile");
    let rich = real("rich_healthy");
    let header = rich.lines().next().unwrap();
    let row = rich.lines().nth(1).unwrap();
    // The n-th row of the log (each at its own time) with cell `i` replaced.
    let swap = |n: usize, i: usize, v: &str| {
        let mut c = cells(rich.lines().nth(n).unwrap());
        c[i] = v;
        c.join(", ")
    };
    let mut invalid_utf8 = rich.as_bytes()[..4000].to_vec();
    invalid_utf8.extend([0xff, 0xfe, 0xc3, b'\n', 0x80, b',', b' ', 0xed, 0xa0, 0x80, b'\n']);
    invalid_utf8.extend(&rich.as_bytes()[4000..]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("noise", noise(7, 200_000)),
        ("noise_after_header", [header.as_bytes(), b"\n", &noise(11, 50_000)].concat()),
        ("nul", [header.as_bytes(), b"\n", &[0u8; 5000][..], b"\n", row.as_bytes()].concat()),
        ("invalid_utf8", invalid_utf8),
        ("long_line", format!("{header}\n{row}\n{}\n{row}\n", "9".repeat(4 << 20)).into_bytes()),
        (
            "huge_cells",
            format!(
                "{header}\n{}\n{}\n{}\n{}\n{row}\n",
                swap(2, 6, "18446744073709551616000 MiB"),
                swap(3, 9, "1e308 W"),
                swap(4, 1, "4294967295"),
                swap(5, 4, "-5 %")
            )
            .into_bytes(),
        ),
        (
            "many_gpus",
            (0..300)
                .map(|i| swap(1, 1, &i.to_string()).replacen(cells(row)[3], &format!("GPU-{i}"), 1) + "\n")
                .fold(format!("{header}\n"), |a, l| a + &l)
                .into_bytes(),
        ),
        (
            "odd_times",
            format!(
                "{header}\n{}\n{}\n{row}\n",
                swap(2, 0, "0000/01/01 00:00:00.000"),
                swap(3, 0, "9999/12/31 23:59:60.999")
            )
            .into_bytes(),
        ),
        ("only_headers", format!("{header}\n{header}\n").into_bytes()),
        ("cr_only", rich.replace('\n', "\r").into_bytes()),
    ];
    for (name, bytes) in cases {
        let path = dir.join(format!("{name}.csv"));
        std::fs::write(&path, &bytes).unwrap();
        let db = dir.join(format!("{name}.db"));
        let (code, _, err) = run(gpulse(None).arg("import").arg(&path).arg("-o").arg(&db));
        assert!(code == 0 || code == 1, "{name}: exit {code}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        match name {
            // A recording tells 256 GPUs apart; the rest are reported, not mixed into others.
            "many_gpus" => assert!(
                err.contains("imported 256 GPU samples of 256 GPUs")
                    && err.contains("44 malformed lines")
                    && err.contains(":258: GPU index 256"),
                "{err}"
            ),
            // Out of range is unreadable, never clamped to 0 or to the largest value.
            "huge_cells" => {
                assert!(err.contains("imported 1 GPU sample of 1 GPU") && err.contains("4 malformed lines"), "{err}")
            }
            "only_headers" => assert!(err.contains("it has a header but no rows"), "{err}"),
            "nul" | "long_line" => assert!(err.contains("1 malformed line in"), "{name}: {err}"),
            _ => {}
        }
        if code == 1 {
            assert_eq!(err.lines().count(), 1, "{name}: one clear line: {err}");
            assert!(!db.exists(), "{name}: nothing half-written");
            continue;
        }
        for args in [&["export"][..], &["diagnose"], &["export", "--query-compute-apps"]] {
            let (code, _, err) = run(gpulse(None).args(args).arg(&db));
            assert!(code == 0 || code == 1, "{name} {args:?}: exit {code}: {err}");
            assert!(!err.contains("panicked"), "{name} {args:?}: {err}");
        }
    }
}
