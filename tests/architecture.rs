//! The crates' dependencies point one way, as docs/architecture.md draws them: checked against
//! `cargo metadata`, so a new arrow fails here.

use std::collections::{BTreeMap, BTreeSet};

/// The triple rustc builds for here, as `rustc -vV` names it.
fn host_triple() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let out = std::process::Command::new("rustc").arg("-vV").output().expect("rustc runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc names its host").to_owned()
    })
}

/// Each workspace package → the packages it depends on (normal dependencies, all of them below).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let direct = direct();
    // Close over what lies below.
    let mut all = BTreeMap::new();
    for name in direct.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<String> = direct[name].iter().cloned().collect();
        while let Some(n) = stack.pop() {
            if seen.insert(n.clone()) {
                stack.extend(direct.get(&n).into_iter().flatten().cloned());
            }
        }
        all.insert(name.clone(), seen);
    }
    all
}

/// Each package → the packages it names itself (normal dependencies).
fn direct() -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        // This machine's platform only: other platforms' crates (wasi) need not be downloaded.
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", host_triple()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: BTreeMap<&str, &str> = doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut direct: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in doc["resolve"]["nodes"].as_array().unwrap() {
        let name = names[node["id"].as_str().unwrap()].to_owned();
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
            .map(|d| names[d["pkg"].as_str().unwrap()].to_owned())
            .collect();
        direct.insert(name, deps);
    }
    direct
}

#[test]
fn the_diagnosis_stands_on_the_model_alone() {
    let g = graph();
    let below = &g["gpulse-diagnose"];
    let ours: Vec<&String> = below.iter().filter(|n| n.starts_with("gpulse")).collect();
    assert_eq!(ours, ["gpulse-base", "gpulse-model"], "gpulse-diagnose depends on: {below:?}");
    assert!(!below.contains("rusqlite") && !below.contains("nvml-wrapper"), "{below:?}");
}

#[test]
fn nothing_in_crates_depends_on_the_binary() {
    for (name, below) in graph() {
        if name != "gpulse" {
            assert!(!below.contains("gpulse"), "{name} depends on the binary");
        }
    }
}

#[test]
fn the_renderers_never_sample_nor_open_a_recording() {
    let g = graph();
    let below = &g["gpulse-report"];
    assert!(
        !below.contains("gpulse-sample") && !below.contains("gpulse-record"),
        "gpulse-report depends on: {below:?}"
    );
    assert!(!below.contains("rusqlite") && !below.contains("nvml-wrapper"), "{below:?}");
}

#[test]
fn the_library_crates_stand_in_layers() {
    let g = graph();
    let ours = |name: &str| -> Vec<String> { g[name].iter().filter(|n| n.starts_with("gpulse")).cloned().collect() };
    // The leaf utilities and the model are the floor: the utilities name no other gpulse crate,
    // the model names them alone (its sets of words are declared with `gpulse_base::words!`).
    assert_eq!(ours("gpulse-model"), ["gpulse-base"], "gpulse-model");
    assert!(ours("gpulse-base").is_empty(), "{:?}", ours("gpulse-base"));
    // Sampling, the recording and nvidia-smi's language stand on the floor alone.
    for name in ["gpulse-sample", "gpulse-smi"] {
        assert_eq!(ours(name), ["gpulse-base", "gpulse-model"], "{name}");
    }
    assert_eq!(ours("gpulse-record"), ["gpulse-base", "gpulse-model"], "gpulse-record");
    // The cluster's sockets name what the sampler finds; they stand on it and nothing above.
    assert_eq!(ours("gpulse-cluster"), ["gpulse-base", "gpulse-model", "gpulse-sample"], "gpulse-cluster");
    // Input reads files and logs; it never renders and never diagnoses.
    let input = ours("gpulse-input");
    assert!(!input.iter().any(|n| n == "gpulse-report" || n == "gpulse-diagnose"), "{input:?}");
}

#[test]
fn the_live_pipeline_never_renders_and_never_stores() {
    let g = graph();
    let below = &g["gpulse-live"];
    // Sinks draw; the pipeline only hands them frames.
    assert!(!below.contains("gpulse-report") && !below.contains("gpulse-input"), "gpulse-live depends on: {below:?}");
    // The recording is a `Store` the binary hands it: a live view links no SQLite.
    for never in ["gpulse-record", "rusqlite"] {
        assert!(!below.contains(never), "gpulse-live depends on {never}: {below:?}");
    }
    for needed in ["gpulse-sample", "gpulse-diagnose"] {
        assert!(below.contains(needed), "gpulse-live should stand on {needed}: {below:?}");
    }
}

/// The job's crate runs it through the pipeline; what it is recorded to is the binary's choice.
#[test]
fn the_job_names_no_storage() {
    let below = &graph()["gpulse-job"];
    for never in ["gpulse-record", "gpulse-input", "rusqlite", "gpulse-serve"] {
        assert!(!below.contains(never), "gpulse-job depends on {never}: {below:?}");
    }
    // A timestamp or a signal's name is a leaf utility, never a reason to lean on a sibling.
    let direct = &direct()["gpulse-job"];
    assert!(!direct.contains("gpulse-smi"), "gpulse-job names gpulse-smi: {direct:?}");
}

#[test]
fn top_links_no_sqlite() {
    let below = &graph()["gpulse-top"];
    assert!(!below.contains("rusqlite") && !below.contains("gpulse-record"), "gpulse-top depends on: {below:?}");
}

#[test]
fn the_server_names_neither_the_sampler_nor_the_recording_nor_the_inputs() {
    // It renders what the pipeline hands its sink; the binary wires the sampler and the file. The
    // pipeline it stands on (gpulse-live) does sample and write, so this holds of its own names
    // only: the server's code cannot call either directly.
    let mine = &direct()["gpulse-serve"];
    assert!(mine.contains("gpulse-live") && mine.contains("gpulse-report"), "{mine:?}");
    for never in ["gpulse-sample", "gpulse-record", "gpulse-input", "rusqlite"] {
        assert!(!mine.contains(never), "gpulse-serve names {never}: {mine:?}");
    }
    assert!(!graph()["gpulse-serve"].contains("gpulse-input"), "{:?}", graph()["gpulse-serve"]);
}

#[test]
fn top_draws_from_frames_and_never_samples_itself() {
    // It stands on the live pipeline (which samples) and names no recording: its feed comes in as
    // polls, a replay as the model's RunData. Of the sampler it names the process facts alone
    // (`proc_info`, for the processes around a GPU process, and the `CpuMeter` the job's tree
    // counts CPU shares with); never a GPU source or the poller.
    let mine = &direct()["gpulse-top"];
    assert!(!mine.contains("gpulse-record"), "gpulse-top names: {mine:?}");
    assert!(mine.contains("gpulse-live") && mine.contains("ratatui"), "{mine:?}");
    assert!(!graph()["gpulse-top"].contains("gpulse-report"), "the terminal view draws its own");
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/top/src");
    let beyond: Vec<String> = sources(&top)
        .into_iter()
        .flat_map(|(p, text)| {
            let mut uses: Vec<&str> = text.split("gpulse_sample::").skip(1).collect();
            uses.retain(|u| !u.starts_with("proc_info") && !u.starts_with("host::CpuMeter"));
            uses.into_iter()
                .map(|u| format!("{}: gpulse_sample::{}", p.display(), u.lines().next().unwrap_or("")))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(beyond.is_empty(), "top names more of the sampler than the process facts:\n{}", beyond.join("\n"));
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    out
}

/// The commands are glue: the use cases (`ops/`), the job and the recorder never climb back up
/// into `cmd/`; only `main.rs` dispatches to it.
#[test]
fn nothing_outside_the_commands_calls_into_them() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let climbs: Vec<String> = sources(&src)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(src.join("cmd")) && *p != src.join("main.rs"))
        .flat_map(|(p, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| l.contains("cmd::") && !l.trim_start().starts_with("//"))
                .map(|(i, l)| format!("{}:{}: {}", p.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(climbs.is_empty(), "calls into cmd/ from outside it:\n{}", climbs.join("\n"));
    assert!(src.join("ops/mod.rs").exists(), "the use cases have a layer of their own");
}

/// The use cases know nothing of the command line: `ops/` takes plain option structs, which
/// `cmd/` builds from clap's arguments, so another front (the Python package, a test) can call
/// them without parsing a command.
#[test]
fn the_use_cases_know_nothing_of_the_command_line() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let leaks: Vec<String> = sources(&src.join("ops"))
        .into_iter()
        .flat_map(|(p, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim_start().starts_with("//"))
                .filter(|(_, l)| l.contains("crate::cli") || l.contains("clap::") || l.contains("cli::"))
                .map(|(i, l)| format!("{}:{}: {}", p.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(leaks.is_empty(), "the command line named in ops/:\n{}", leaks.join("\n"));
}

/// The source files that may read `/proc` outside the sampler, each with why. Anything else
/// asks `gpulse_sample` (`proc_info`, `host`), so that one reader knows the files' quirks.
const PROC_READERS: &[(&str, &str)] = &[
    (
        "src/output.rs",
        "names this process's own descriptors (`-o /proc/self/fd/N`) and lists those it was started with: paths, not a process's facts",
    ),
    (
        "crates/fake-nvml/src/api.rs",
        "the stand-in libnvidia-ml.so answers a process's name as the driver does, from /proc, inside the process that loads it",
    ),
];

/// Only `crates/sample` reads `/proc` (a `"/proc` literal or `procfs::`): the view, the
/// pipeline, the server and the binary ask it. Tests are left out (they check the sampler
/// against the files).
#[test]
fn only_the_sampler_reads_proc() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = sources(&root.join("src"));
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = krate.unwrap().path();
        if dir.file_name().is_some_and(|n| n != "sample") && dir.join("src").is_dir() {
            files.extend(sources(&dir.join("src")));
        }
    }
    let readers: Vec<String> = files
        .into_iter()
        .filter_map(|(p, text)| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let is_test = rel.ends_with("_tests.rs") || rel.ends_with("/tests.rs");
            if is_test || PROC_READERS.iter().any(|(f, _)| *f == rel) {
                return None;
            }
            // A file's unit tests come last, after their `#[cfg(test)]`.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let lines: Vec<String> = code
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim_start().starts_with("//"))
                .filter(|(_, l)| l.contains("\"/proc") || l.contains("procfs::"))
                .map(|(i, l)| format!("{rel}:{}: {}", i + 1, l.trim()))
                .collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        })
        .collect();
    assert!(
        readers.is_empty(),
        "/proc read outside crates/sample (ask gpulse_sample::proc_info):\n{}",
        readers.join("\n")
    );
    for (file, why) in PROC_READERS {
        assert!(root.join(file).is_file() && !why.is_empty(), "{file} is listed as a reader but is gone");
    }
}

/// A library crate's tests name a fixture through `gpulse-fixtures`, never by a path that climbs
/// out of their crate.
#[test]
fn crates_read_fixtures_only_through_the_fixtures_crate() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut climbing = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        // The fixtures crate is the one that knows where they lie.
        if dir.ends_with("fixtures") {
            continue;
        }
        for sub in ["src", "tests", "benches"] {
            if !dir.join(sub).is_dir() {
                continue;
            }
            for (p, text) in sources(&dir.join(sub)) {
                if text.contains("../../tests/") {
                    climbing.push(p.display().to_string());
                }
            }
        }
    }
    assert!(climbing.is_empty(), "fixtures named by a path outside the crate:\n{}", climbing.join("\n"));
}

/// Diagnose's floors, bottom first, by file (relative to `crates/diagnose/src`; the first that
/// matches places a file): what the run is, what its threads' samples say, the ledger, the rules
/// and their causes, and the diagnosis that runs them. A file names only what its own floor and
/// those below define, so the walk from a recording to a finding never comes back up.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "the run",
        &[
            "run/",
            "steps.rs",
            "finding_id.rs",
            "account_kind.rs",
            "main_thread/classify.rs",
            "main_thread/classifier.rs",
            "main_thread/own.rs",
        ],
    ),
    (
        "the threads' samples",
        &["main_thread/mod.rs", "main_thread/clocks.rs", "main_thread/live.rs", "main_thread/startup.rs"],
    ),
    ("the ledger", &["ledger/"]),
    ("the rules", &["rules/", "main_thread/", "ranks.rs", "roofline.rs", "energy.rs", "forecast.rs"]),
    ("the diagnosis", &["analysis.rs", "compare.rs", "rolling.rs", "lib.rs"]),
];

/// What `lib.rs` itself defines for the diagnosis to run (the top floor); its other items are the
/// words every floor speaks (`Finding`, `Cost`, `Severity`, `round`).
const ENTRY_POINTS: &[&str] = &["diagnose", "diagnose_run", "diagnose_with_ledger", "summary"];

fn floor_of(file: &str) -> usize {
    FLOORS
        .iter()
        .position(|(_, prefixes)| prefixes.iter().any(|p| file.starts_with(p)))
        .unwrap_or_else(|| panic!("{file} stands on no floor: add it to FLOORS (and to docs/architecture.md)"))
}

/// The code of a file without its comments and its tests (a `#[cfg(test)]` module runs to its
/// file's end; a test file holds nothing else).
fn code_of(file: &str, text: &str) -> String {
    if file.ends_with("tests.rs") {
        return String::new();
    }
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The paths a file names through `crate::` or `super::`, groups spread: `crate::run::{mean,
/// primary}` is `crate::run::mean` and `crate::run::primary`.
fn named_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("::") {
        let head_start = code[..i].rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |k| k + 1);
        let head = &code[head_start..i];
        let before = code[..head_start].chars().last();
        if !matches!(head, "crate" | "super") || before == Some(':') {
            continue;
        }
        let rest = &code[i + 2..];
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let after = &rest[path.len()..];
        if after.starts_with('{') {
            let group = &after[1..after.find('}').unwrap_or(after.len())];
            for item in group.split(',').map(str::trim).filter(|s| !s.is_empty() && *s != "self") {
                let item: String = item.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                out.push(format!("{head}::{path}{item}"));
            }
        } else {
            out.push(format!("{head}::{}", path.trim_end_matches(':')));
        }
    }
    out
}

/// Where a named item is defined: the files of module `module` (a file or a folder) that define
/// `item`, as a function, type, constant or module.
fn defined_in<'a>(files: &'a [(String, String)], module: &str, item: &str) -> Vec<&'a str> {
    let kinds = ["fn ", "struct ", "enum ", "const ", "type ", "mod ", "static ", "trait "];
    let in_module = |f: &str| module.is_empty() || f == format!("{module}.rs") || f.starts_with(&format!("{module}/"));
    files
        .iter()
        .filter(|(f, _)| in_module(f))
        .filter(|(_, code)| {
            kinds.iter().any(|k| {
                code.match_indices(&format!("{k}{item}")).any(|(j, m)| {
                    let next = code[j + m.len()..].chars().next();
                    !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
            })
        })
        .map(|(f, _)| f.as_str())
        .collect()
}

#[test]
fn the_diagnosis_stands_in_floors() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/diagnose/src");
    let files: Vec<(String, String)> = sources(&src)
        .into_iter()
        .map(|(p, text)| {
            let f = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            let code = code_of(&f, &text);
            (f, code)
        })
        .collect();
    let lib = &files.iter().find(|(f, _)| f == "lib.rs").unwrap().1;
    let modules: Vec<&str> = files.iter().map(|(f, _)| f.split(['/', '.']).next().unwrap()).collect();
    let mut climbs = Vec::new();
    for (file, code) in files.iter().filter(|(f, c)| !c.is_empty() && f != "lib.rs") {
        let mine = floor_of(file);
        for path in named_paths(code) {
            let parts: Vec<&str> = path.split("::").collect();
            let item = *parts.last().unwrap();
            let module = match parts[0] {
                // `super` of `a/b.rs` is `a`; of `a/mod.rs`, the crate's root.
                "super" if !file.ends_with("mod.rs") => file.rsplit_once('/').map_or("", |(d, _)| d).to_owned(),
                _ if parts.len() > 2 => parts[1..parts.len() - 1].join("/"),
                _ if parts.len() == 2 && modules.contains(&item) => item.to_owned(),
                _ => String::new(),
            };
            // A name at the root is lib.rs's own, or what it re-exports from a module.
            let module = match module.as_str() {
                "" => match modules.iter().find(|m| {
                    lib.contains(&format!("pub use {m}::")) && {
                        let at = lib.find(&format!("pub use {m}::")).unwrap();
                        lib[at..].split(';').next().unwrap().contains(item)
                    }
                }) {
                    Some(m) => m.to_string(),
                    None if ENTRY_POINTS.contains(&item) && mine + 1 < FLOORS.len() => {
                        climbs.push(format!("{file} ({}) calls the diagnosis: {path}", FLOORS[mine].0));
                        continue;
                    }
                    None => continue,
                },
                m => m.to_owned(),
            };
            let homes = defined_in(&files, &module, item);
            let Some(lowest) = homes.iter().map(|h| floor_of(h)).min() else { continue };
            if lowest > mine {
                climbs.push(format!(
                    "{file} ({}) names {path}, defined on a floor above it ({}: {})",
                    FLOORS[mine].0,
                    FLOORS[lowest].0,
                    homes.join(", ")
                ));
            }
        }
    }
    assert!(climbs.is_empty(), "diagnose's floors climb back up:\n{}", climbs.join("\n"));
}
