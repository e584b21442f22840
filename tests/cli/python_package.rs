//! The Python package: it agrees with the recorder on the recording's schema, and its tests
//! never skip silently.

use std::process::Command;

use super::support::*;

/// The schema version `python/gpulse/_load.py` reads up to.
fn python_schema() -> u32 {
    let (code, out, err) = run(Command::new("python3")
        .args(["-c", "from gpulse import _load; print(_load.SCHEMA_VERSION)"])
        .env("PYTHONPATH", root().join("python")));
    assert_eq!(code, 0, "{err}");
    out.trim().parse().unwrap_or_else(|_| panic!("not a number: {out}"))
}

/// Sets a recording's `schema_version` with Python's sqlite3.
fn set_schema(path: &std::path::Path, version: u32) {
    let script = "import sqlite3, sys\n\
        c = sqlite3.connect(sys.argv[1])\n\
        c.execute(\"UPDATE meta SET value = ? WHERE key = 'schema_version'\", (sys.argv[2],))\n\
        c.commit()";
    let (code, _, err) = run(Command::new("python3").args(["-c", script]).arg(path).arg(version.to_string()));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn python_reads_the_schema_the_recorder_writes_and_refuses_a_newer_one_as_the_cli_does() {
    let newest = gpulse_record::schema::SCHEMA_VERSION;
    assert_eq!(
        python_schema(),
        newest,
        "python/gpulse/_load.py's SCHEMA_VERSION must be gpulse_record::schema::SCHEMA_VERSION"
    );
    // A recording this gpulse just wrote: Python reads its schema.
    let dir = fresh_dir("python", "schema");
    let db = dir.join("fresh.db");
    let _ = std::fs::remove_file(&db);
    let (code, _, err) =
        run(gpulse(None).args(["record", "--duration", "300ms", "--interval", "100ms", "-o"]).arg(&db));
    assert_eq!(code, 0, "{err}");
    let check = "import gpulse, sys\n\
        from gpulse import _load\n\
        try:\n    print(_load.schema_version(sys.argv[1]))\n\
        except gpulse.NewerSchemaError as e:\n    print('refused:', e)";
    let python = |path: &std::path::Path| {
        let (code, out, err) =
            run(Command::new("python3").args(["-c", check]).arg(path).env("PYTHONPATH", root().join("python")));
        assert_eq!(code, 0, "{err}");
        out.trim().to_owned()
    };
    assert_eq!(python(&db), newest.to_string());
    // One schema newer: the CLI and the package refuse it in the same words.
    set_schema(&db, newest + 1);
    let (code, _, cli) = run(gpulse(None).arg("diagnose").arg(&db));
    assert_eq!(code, 1, "{cli}");
    let message =
        format!("{} was written by a newer gpulse (schema {}, this one reads {newest})", db.display(), newest + 1);
    assert!(cli.contains(&message), "{cli}");
    assert_eq!(python(&db), format!("refused: {message}"));
}

#[test]
fn the_python_tests_say_when_pandas_is_missing_and_fail_where_it_is_required() {
    // `python3 -S` leaves site-packages out, so pandas cannot be imported.
    let python = |require: bool| {
        let mut cmd = Command::new("python3");
        cmd.arg("-S")
            .arg(root().join("tests/python/test_package.py"))
            .env("PYTHONPATH", root().join("python"))
            .env("GPULSE_TEST_RECORDING", fixture("h200-gpulse/training_workers.db"))
            .env_remove("GPULSE_EVENTS")
            .env_remove("GPULSE_REQUIRE_PANDAS");
        if require {
            cmd.env("GPULSE_REQUIRE_PANDAS", "1");
        }
        run(&mut cmd)
    };
    let (code, out, err) = python(false);
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<&str> = err.lines().filter_map(|l| l.split_once("skipped: ")).map(|l| l.1).collect();
    assert_eq!(lines, ["gpulse.load() into pandas (python3 has no pandas; CI installs it)"], "{err}");
    assert!(err.contains("OK (skipped=1)"), "{err}");
    let (code, _, err) = python(true);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("No module named 'pandas'") && !err.contains("skipped: "), "{err}");
}

/// What `python3` prints last for `gpulse.load(path)`: the exception's own line.
fn python_load(path: &std::path::Path, site: bool) -> String {
    let mut cmd = Command::new("python3");
    if !site {
        cmd.arg("-S");
    }
    let script = "import gpulse, sys\ntry:\n    gpulse.load(sys.argv[1])\nexcept Exception as e:\n    print(e)";
    let (code, out, err) = run(cmd.args(["-c", script]).arg(path).env("PYTHONPATH", root().join("python")));
    assert_eq!(code, 0, "{err}");
    out.trim().to_owned()
}

#[test]
fn a_damaged_recording_gets_the_same_words_from_python_as_from_the_cli() {
    let dir = fresh_dir("python", "damaged");
    let whole = std::fs::read(fixture("h200-gpulse/training_workers.db")).unwrap();
    let cases: [(&str, &[u8]); 2] = [("half.db", &whole[..whole.len() / 2]), ("header.db", &whole[..60])];
    for (name, bytes) in cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let (code, _, cli) = run(gpulse(None).arg("diagnose").arg(&path));
        assert_eq!(code, 1, "{cli}");
        let python = python_load(&path, false);
        // The CLI says "cannot read X: <why>" or "X: <why>"; Python raises <why> itself.
        assert!(!python.is_empty() && cli.trim_end().ends_with(&python), "{name}: cli {cli:?}, python {python:?}");
        assert!(python.contains(&path.display().to_string()), "{python}");
    }
    let half = dir.join("half.db");
    assert_eq!(
        python_load(&half, false),
        format!(
            "{} is damaged: it was cut short: {} of its {} bytes are there",
            half.display(),
            whole.len() / 2,
            whole.len()
        )
    );
    // A whole recording without pandas (`-S` leaves site-packages out): one line saying what to install.
    assert_eq!(
        python_load(&fixture("h200-gpulse/training_workers.db"), false),
        "gpulse.load() needs pandas, which is not installed: pip install pandas"
    );
}
