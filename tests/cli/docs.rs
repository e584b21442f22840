//! The docs against the binary: every flag a doc shows for a command exists, every default a doc
//! states is the one `--help` gives, and the exit statuses the README promises are the ones
//! gpulse returns. Docs and code cannot drift apart silently.

use std::collections::BTreeMap;

use super::support::*;

/// Every subcommand's `--help`, by name (`""` for `gpulse` itself).
fn helps() -> BTreeMap<String, String> {
    let top = run(gpulse(None).arg("--help")).1;
    let mut out = BTreeMap::new();
    let verbs: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|v| v != "help")
        .collect();
    assert!(verbs.len() >= 10, "{top}");
    for v in verbs {
        let (code, help, err) = run(gpulse(None).args([v.as_str(), "--help"]));
        assert_eq!(code, 0, "{v}: {err}");
        out.insert(v, help);
    }
    out.insert(String::new(), top);
    out
}

/// The flags `--help` lists, each with its `[default: …]` when it has one.
fn flags(help: &str) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for line in help.lines().map(str::trim_start).filter(|l| l.starts_with('-')) {
        let default = line.split_once("[default: ").and_then(|(_, d)| d.split_once(']')).map(|(d, _)| d.to_owned());
        for word in line.split([' ', ',']).take_while(|w| w.starts_with('-') || w.starts_with('<') || w.is_empty()) {
            if word.starts_with('-') {
                // `--query-compute-apps[=<FIELDS>]`: an optional value.
                let name = word.split(['[', '=']).next().unwrap_or(word);
                out.insert(name.to_owned(), default.clone());
            }
        }
    }
    out
}

/// Every `gpulse VERB …` command line the docs show: code spans, and lines of code blocks.
fn documented_commands() -> Vec<(String, String)> {
    let mut docs = vec![root().join("README.md")];
    docs.extend(std::fs::read_dir(root().join("docs")).unwrap().map(|e| e.unwrap().path()));
    let mut out = Vec::new();
    for doc in docs.into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")) {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let mut in_block = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if in_block {
                let l = line.trim_start().trim_start_matches("$ ");
                if l.starts_with("gpulse ") {
                    out.push((name.clone(), l.to_owned()));
                }
            } else {
                out.extend(
                    line.split('`')
                        .skip(1)
                        .step_by(2)
                        .filter(|s| s.starts_with("gpulse "))
                        .map(|s| (name.clone(), s.to_owned())),
                );
            }
        }
    }
    out
}

#[test]
fn every_flag_and_default_the_docs_show_is_the_binarys() {
    let helps = helps();
    let by_verb: BTreeMap<&str, BTreeMap<String, Option<String>>> =
        helps.iter().map(|(v, h)| (v.as_str(), flags(h))).collect();
    let commands = documented_commands();
    assert!(commands.len() > 30, "too few command lines found in the docs: {}", commands.len());
    let mut wrong = Vec::new();
    let mut checked_defaults = 0;
    for (doc, line) in &commands {
        let words: Vec<&str> = line.split_whitespace().collect();
        // `gpulse VERB …`, or `gpulse --query-gpu=…` (the default command's query mode).
        let verb = words.get(1).filter(|w| by_verb.contains_key(**w)).copied().unwrap_or("");
        let known = &by_verb[verb];
        // `gpulse --query-gpu=…` is the query command without its name.
        let query = &by_verb["query"];
        // What comes after `--` belongs to the job, not to gpulse.
        let own = words.iter().skip(1).take_while(|w| **w != "--");
        let own: Vec<&str> = own.map(|w| w.trim_matches(|c| matches!(c, '[' | ']' | '|' | '(' | ')' | ','))).collect();
        for (i, word) in own.iter().enumerate() {
            if !word.starts_with('-') || *word == "-" || word.starts_with("-l") && verb.is_empty() {
                continue;
            }
            // nvidia-smi's `-lms` is gpulse's `--loop-ms`.
            let flag = if *word == "-lms" { "--loop-ms" } else { word.split(['=', '[']).next().unwrap() };
            if flag.chars().nth(1).is_some_and(|c| c.is_ascii_digit()) {
                continue;
            }
            let global = &by_verb[""];
            let found = known.get(flag).or_else(|| global.get(flag));
            let Some(default) = found.or_else(|| if verb.is_empty() { query.get(flag) } else { None }) else {
                wrong.push(format!("{doc}: `{line}`: gpulse {verb} has no {flag}"));
                continue;
            };
            // `--interval 1s` in a synopsis shows the default; an example value is allowed only
            // where the flag has no default.
            let value = word.split_once('=').map(|(_, v)| v).or_else(|| own.get(i + 1).copied());
            if let (Some(default), Some(value)) = (default, value) {
                let placeholder = value.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c == '.');
                if !value.starts_with('-') && !placeholder && !value.is_empty() {
                    checked_defaults += 1;
                    // `[--format text|json]` names the choices, the default among them.
                    let choices: Vec<&str> = value.split("\\|").flat_map(|v| v.split('|')).collect();
                    if line.contains(&format!("[{flag} {value}]")) && !choices.contains(&default.as_str()) {
                        wrong.push(format!("{doc}: `{line}`: {flag} defaults to {default}, not {value}"));
                    }
                }
            }
        }
    }
    assert!(checked_defaults >= 3, "no documented default was checked");
    assert!(wrong.is_empty(), "the docs disagree with --help:\n{}", wrong.join("\n"));
}

#[test]
fn defaults_written_out_in_the_docs_are_the_binarys() {
    // "`--interval` (default `1s`": the docs' own sentences about a flag's default.
    let helps = helps();
    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        let verb = path.file_stem().unwrap().to_string_lossy().into_owned();
        let Some(help) = helps.get(&verb) else { continue };
        let known = flags(help);
        let text = std::fs::read_to_string(&path).unwrap();
        for (at, _) in text.match_indices("` (default `") {
            let flag = text[..at].rsplit('`').next().unwrap();
            let value = text[at + 12..].split('`').next().unwrap();
            if !flag.starts_with("--") {
                continue;
            }
            let Some(default) = known.get(flag) else {
                panic!("docs/{verb}.md names {flag}, which gpulse {verb} lacks")
            };
            assert_eq!(default.as_deref(), Some(value), "docs/{verb}.md: {flag}'s default");
            checked += 1;
        }
    }
    assert!(checked >= 1, "no default sentence found in docs/");
}

/// The verbs in the first parenthesis after `marker` in the README: "(`a`, `b`, `c`)".
fn readme_verbs(before: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap().replace('\n', " ");
    let at = readme.find(before).unwrap_or_else(|| panic!("the README no longer says {before:?}"));
    let open = readme[at..].find('(').unwrap() + at;
    let close = readme[open..].find(')').unwrap() + open;
    readme[open..close]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|v| v.strip_prefix("gpulse").unwrap_or(v).trim().to_owned())
        .collect()
}

#[test]
fn without_a_driver_each_command_exits_as_the_readme_says() {
    let missing = root().join("no-such-libnvidia-ml.so");
    // The fewest arguments each command needs to start.
    let mut sleeper = KillOnDrop::spawn(std::process::Command::new("sleep").arg("30"));
    let sleeper_pid = sleeper.id();
    let dir = fresh_dir("docs", "no_driver");
    let args = |verb: &str| -> Vec<String> {
        let out = dir.join(format!("{verb}.db")).display().to_string();
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match verb {
            "" => v(&[]),
            "query" => v(&["query", "--query-gpu=index", "--format=csv"]),
            "record" => v(&["record", "--duration", "300ms", "-o", &out]),
            "run" => v(&["run", "--status", "off", "-o", &out, "--", "true"]),
            "attach" => v(&["attach", &sleeper_pid.to_string(), "-o", &out]),
            "serve" => v(&["serve", "--listen", "127.0.0.1:0", "--no-auth", "--duration", "300ms"]),
            other => v(&[other]),
        }
    };
    let only_read = readme_verbs("the commands that only read");
    let record = readme_verbs("the commands that record");
    assert!(only_read.len() >= 4 && record.len() >= 3, "{only_read:?} {record:?}");
    for (verbs, want) in [(&only_read, 9), (&record, 0)] {
        for verb in verbs {
            let mut cmd = gpulse(None);
            cmd.env("GPULSE_NVML_LIB", &missing).args(args(verb));
            if verb == "attach" {
                // attach follows its PID to the end: end it shortly.
                let pid = sleeper_pid;
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(1500));
                    // SAFETY: kill(2) on a process (or group) this test started.
                    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                });
            }
            let (code, _, err) = run(&mut cmd);
            assert_eq!(code, want, "gpulse {verb}: {err}");
            let driver: Vec<&str> = err
                .lines()
                .filter(|l| l.contains("no NVIDIA driver") || l.contains("cannot load the NVML library"))
                .collect();
            assert_eq!(driver.len(), 1, "gpulse {verb} says so in one line: {err}");
        }
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn the_process_classes_the_docs_list_are_the_ones_gpulse_writes() {
    use gpulse_model::GpuProcessClass::{Foreign, Gone, Tree};
    let classes: Vec<String> =
        [Tree, Foreign, Gone].iter().map(|c| serde_json::to_value(c).unwrap().as_str().unwrap().to_owned()).collect();
    for doc in ["docs/serve.md", "docs/recording-format.md", "docs/top.md", "README.md"] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("`tree`") && l.contains("`foreign`"))
            .unwrap_or_else(|| panic!("{doc} lists no classes"));
        for c in &classes {
            assert!(line.contains(&format!("`{c}`")), "{doc} leaves out the class `{c}`: {line}");
        }
    }
}

/// Every finding gpulse can write has its row in the table of rules in docs/diagnosis.md.
#[test]
fn every_finding_has_its_rule_in_the_docs() {
    let text = std::fs::read_to_string(root().join("docs/diagnosis.md")).unwrap();
    let first_cells: Vec<&str> =
        text.lines().filter(|l| l.starts_with("| `")).filter_map(|l| l.split(" | ").next()).collect();
    for id in gpulse_diagnose::FindingId::ALL {
        let name = format!("`{id}`");
        assert!(first_cells.iter().any(|c| c.contains(&name)), "docs/diagnosis.md has no rule for {name}");
    }
}

#[test]
fn every_metric_of_the_table_is_in_the_docs_list() {
    let text = std::fs::read_to_string(root().join("docs/query.md")).unwrap();
    for m in gpulse_model::TABLE {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", m.smi[0])))
            .unwrap_or_else(|| panic!("docs/query.md does not list {}", m.smi[0]));
        assert!(line.contains(&format!("({})", m.nvml_field().unwrap())), "{line}");
        if let Some(d) = m.dcgm {
            assert!(line.contains(&format!("`{}`", d.name)), "{line}");
        }
    }
}
