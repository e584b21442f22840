//! `gpulse report` on every kind of input, opened in headless Chromium as a user would: no
//! script errors, each finding's window shaded on its own GPU's charts and no other's, readable
//! axes, one time axis down the page; and `--png`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::*;

/// The first Chromium on PATH; `None` (after saying so) where there is none and CI does not ask.
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    if found.is_none() {
        assert!(std::env::var_os("GPULSE_REQUIRE_CHROMIUM").is_none(), "chromium is required");
        skipped("the report in a real browser (no chromium; CI installs it)");
    }
    found
}

const FLAGS: [&str; 7] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
];

/// The DOM Chromium builds from `html`, and what it logged.
fn open_in_chromium(chromium: &str, html: &Path, dir: &Path) -> (String, String) {
    let out = Command::new(chromium)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom", &format!("file://{}", html.display())])
        .output()
        .unwrap();
    (String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A screenshot of the top of the page.
fn screenshot(chromium: &str, html: &Path, png: &Path, dir: &Path) {
    let shot = Command::new(chromium)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args([
            "--window-size=1000,1600",
            &format!("--screenshot={}", png.display()),
            &format!("file://{}", html.display()),
        ])
        .output()
        .unwrap();
    assert!(shot.status.success(), "{}", String::from_utf8_lossy(&shot.stderr));
    assert!(std::fs::metadata(png).unwrap().len() > 30_000, "a real picture, not a blank page");
}

/// One chart of the DOM: its scope (`gpu-0`, `run`) and its markup.
fn charts(dom: &str) -> Vec<(String, &str)> {
    dom.split("<svg class=\"chart\"")
        .skip(1)
        .map(|c| {
            let c = &c[..c.find("</svg>").unwrap()];
            let scope = c.split("data-scope=\"").nth(1).unwrap().split('"').next().unwrap().to_owned();
            (scope, c)
        })
        .collect()
}

/// The texts of every element with class `class` in `chart`.
fn texts<'a>(chart: &'a str, class: &str) -> Vec<&'a str> {
    chart
        .split(&format!("class=\"{class}\""))
        .skip(1)
        .map(|t| t.split('>').nth(1).unwrap().split('<').next().unwrap())
        .collect()
}

/// The inputs, one of each kind, and the findings diagnose sees in each.
fn inputs(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let stall = dir.join("stall.db");
    let (code, _, err) = run(gpulse(None)
        .arg("import")
        .arg(fixture("h200-2026-11-29/rich_stall.csv"))
        .arg(fixture("h200-2026-11-29/apps_stall.csv"))
        .arg("-o")
        .arg(&stall));
    assert_eq!(code, 0, "{err}");
    vec![
        ("recording", fixture("h200-gpulse/training_workers.db")),
        ("nvidia-smi log", fixture("h200-2026-11-29/rich_healthy.csv")),
        ("leak", fixture("h200-gpulse-run/leak.db")),
        ("stall", stall),
        ("imbalance", fixture("h200x2-gpulse/uneven.db")),
        ("two GPUs, each its findings", fixture("h200x2-gpulse/dataparallel.db")),
        ("dataloader", fixture("h200-gpulse-run/dl_bound.db")),
    ]
}

fn findings(input: &Path) -> Vec<serde_json::Value> {
    let (code, out, err) = run(gpulse(None).args(["diagnose", "--format", "json"]).arg(input));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["findings"].as_array().unwrap().clone()
}

#[test]
fn every_kind_of_input_renders_with_its_findings_on_its_own_gpus_charts() {
    let dir = fresh_dir("report", "browser");
    let chromium = chromium();
    for (kind, input) in inputs(&dir) {
        let html = dir.join(format!("{}.html", kind.replace(' ', "_")));
        let (code, _, err) = run(gpulse(None).arg("report").arg(&input).arg("-o").arg(&html));
        assert_eq!(code, 0, "{kind}: {err}");
        let text = std::fs::read_to_string(&html).unwrap();
        // Self-contained: no script, nothing loaded from elsewhere.
        for outside in ["<script", "src=", "href=", "<link", "url("] {
            assert!(!text.contains(outside), "{kind}: {outside}");
        }
        let Some(chromium) = chromium else { continue };
        let (dom, log) = open_in_chromium(chromium, &html, &dir);
        assert!(!log.contains("Uncaught") && !log.contains(":CONSOLE"), "{kind}: script errors: {log}");
        let charts = charts(&dom);
        assert!(charts.len() >= 3, "{kind}: {} charts", charts.len());
        // Readable axes, and one time axis for every chart.
        let x0 = texts(charts[0].1, "tick x");
        for (scope, c) in &charts {
            let (x, y) = (texts(c, "tick x"), texts(c, "tick y"));
            assert!(x.len() >= 4 && y.len() >= 4, "{kind} {scope}: x {x:?}, y {y:?}");
            assert_eq!(x, x0, "{kind} {scope}: the same time axis as the first chart");
        }
        for f in findings(&input) {
            let Some(w) = f["evidence"]["window_s"].as_array() else { continue };
            let (id, gpu) = (f["id"].as_str().unwrap(), f["evidence"]["gpu"].as_u64());
            let shaded = format!(
                "data-finding=\"{id}\" data-kind=\"window\" data-window=\"{} {}\"",
                w[0].as_f64().unwrap(),
                w[1].as_f64().unwrap()
            );
            for (scope, c) in &charts {
                let concerned = match gpu {
                    Some(g) => *scope == format!("gpu-{g}"),
                    None => true,
                };
                let concerns_another = gpu.is_some() && scope.starts_with("gpu-");
                if concerned {
                    assert!(c.contains(&shaded), "{kind}: {id} {w:?} not shaded on {scope}");
                    assert!(c.contains(&format!(">{id}</text>")), "{kind}: {id} not labelled on {scope}");
                } else if concerns_another {
                    assert!(!c.contains(&shaded), "{kind}: {id} of GPU {gpu:?} shaded on {scope}");
                }
            }
            for p in f["evidence"]["pauses"].as_array().into_iter().flatten() {
                let pause = format!(
                    "data-kind=\"pause\" data-window=\"{} {}\"",
                    p[0].as_f64().unwrap(),
                    p[1].as_f64().unwrap()
                );
                assert!(charts.iter().any(|c| c.1.contains(&pause)), "{kind}: pause {p} not shaded");
            }
        }
        match kind {
            "stall" => assert!(dom.contains("idle_holder") && dom.contains("<td>1250</td>"), "the idle holder listed"),
            "nvidia-smi log" => assert!(!dom.contains("SM active (GPM)"), "no GPM in the log, none in the legend"),
            "leak" => {
                let oom = charts.iter().filter(|c| c.1.contains("data-kind=\"cuda_oom\"")).count();
                assert_eq!(oom, charts.len(), "the OOM is marked on every chart of its GPU and the run's");
                assert!(dom.contains(">OOM</text>") && dom.contains("(cut when recorded)"), "{kind}");
            }
            "dataloader" => {
                assert!(charts.iter().any(|c| c.0 == "run" && c.1.contains("step time")), "the loop's chart");
                assert!(dom.contains("steps/s") && dom.contains("waiting for data"), "the summary's pace");
            }
            _ => {}
        }
        if matches!(kind, "stall" | "leak") {
            screenshot(chromium, &html, &dir.join(format!("{kind}.png")), &dir);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn png_beside_the_html() {
    let dir = fresh_dir("report", "png");
    let (html, png) = (dir.join("r.html"), dir.join("r.png"));
    let leak = fixture("h200-gpulse-run/leak.db");
    let (code, _, err) = run(gpulse(None).arg("report").arg(&leak).arg("-o").arg(&html).arg("--png").arg(&png));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("wrote") && err.contains("r.png"), "{err}");
    let (w, h, rgba) = gpulse_report::png::decode(&std::fs::read(&png).unwrap()).expect("a PNG");
    // The page's 940-unit width at the PNG's scale, and tall enough for the summary and 7 charts.
    assert_eq!(w, (940.0 * gpulse_report::png::SCALE) as u32);
    assert!(h > 7 * 150, "{w}×{h}");
    let inked = rgba.chunks(4).filter(|p| p[..3] != [255, 255, 255]).count();
    assert!(inked > rgba.len() / 4 / 10, "more than a tenth of the picture is drawn: {inked}");
    // The same file as -o is refused before anything is written.
    let (code, _, err) = run(gpulse(None).arg("report").arg(&leak).arg("-o").arg(&html).arg("--png").arg(&html));
    assert_ne!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
