//! `--web-config` beyond `serve`'s start: `run --serve` and `attach --serve` read it as `serve`
//! does (and refuse a bad one in the same words before anything starts), and SIGHUP makes `serve`
//! read it again: a certificate renewed in place, a new password; a broken file keeps the old.

use std::cell::RefCell;
use std::process::{Command, Stdio};

use super::serve::{SCENARIO, Serving, TOKEN, serve_started};
use super::serve_tls::{PASSWORD, TestCa, USER, private, tls_get, web_config, write_web_yml};
use super::support::KillOnDrop;
use super::support::{fresh_dir, gpulse, http_get, run, wait_until};

/// The job `run` starts here: it waits for a file `stop` beside it.
const WAIT_FOR_STOP: &str = "while [ ! -e stop ]; do sleep 0.05; done";

#[test]
fn run_serves_its_job_over_tls_with_basic_auth_and_nothing_less() {
    let dir = fresh_dir("web-config", "run");
    let (web, ca) = web_config(&dir);
    let child = KillOnDrop::spawn(
        gpulse(Some(SCENARIO))
            .current_dir(&dir)
            .args(["run", "--serve", "127.0.0.1:0", "--web-config", web.to_str().unwrap()])
            .args(["--status", "off", "--no-report", "-o", "r.db", "--", "sh", "-c", WAIT_FOR_STOP])
            .env("GPULSE_TOKEN", TOKEN)
            .stderr(Stdio::piped()),
    );
    let mut s = Serving::from_child(child);
    assert!(s.stderr.contains(&format!("serving on https://{}/", s.addr)), "{}", s.stderr);
    let right = format!("{USER}:{PASSWORD}");
    let metrics = |basic: Option<&str>| tls_get(&s.addr, &ca, "/metrics", basic);
    wait_until(30, "the job's first sample, over TLS", || metrics(Some(&right)).0 == 200);
    let (_, body, _) = metrics(Some(&right));
    assert!(body.contains("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""), "{body}");
    assert_eq!(metrics(None).0, 401, "no credentials");
    assert_eq!(metrics(Some(&format!("{USER}:{}", &PASSWORD[1..]))).0, 401, "a wrong password");
    let (code, head, body) = http_get(&s.addr, "/metrics", &[]);
    assert_eq!(code, 400, "plain HTTP: {head}{body}");
    assert!(body.contains("Client sent an HTTP request to an HTTPS server."), "{body}");
    std::fs::write(dir.join("stop"), "").unwrap();
    assert!(s.child.wait().unwrap().success());
}

/// `gpulse run`/`attach` with `args` around a bad web config, and `serve` with it: each says the
/// same one line and exits 1.
#[test]
fn a_bad_web_config_stops_run_and_attach_before_anything_starts_in_serves_words() {
    let dir = fresh_dir("web-config", "bad");
    web_config(&dir);
    std::fs::copy(dir.join("server-key.pem"), dir.join("open-key.pem")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("open-key.pem"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let yml = |name: &str, text: &str| private(&dir, name, text).display().to_string();
    let cases = [
        (dir.join("missing.yml").display().to_string(), "cannot read"),
        (yml("open-key.yml", "tls_server_config:\n  cert_file: server.pem\n  key_file: open-key.pem\n"), "chmod 600"),
        (yml("hash.yml", "basic_auth_users:\n  prometheus: hunter2\n"), "not a bcrypt hash"),
        (yml("unknown.yml", "tls_config:\n  cert_file: server.pem\n"), "unknown field"),
    ];
    let mut target = KillOnDrop::spawn(Command::new("sleep").arg("60"));
    let pid = target.id().to_string();
    for (file, why) in cases {
        let (code, _, serve_err) =
            run(gpulse(Some(SCENARIO)).args(["serve", "--listen", "127.0.0.1:0", "--web-config", &file]));
        assert_eq!(code, 1, "{serve_err}");
        assert!(serve_err.starts_with("gpulse: ") && serve_err.contains(why), "{serve_err}");
        assert_eq!(serve_err.lines().count(), 1, "{serve_err}");
        let ran = run(gpulse(Some(SCENARIO)).current_dir(&dir).args([
            "run",
            "--serve",
            "127.0.0.1:0",
            "--web-config",
            &file,
            "-o",
            "r.db",
            "--",
            "touch",
            "started",
        ]));
        assert_eq!((ran.0, ran.2.as_str()), (1, serve_err.as_str()), "run, {file}");
        assert!(!dir.join("started").exists() && !dir.join("r.db").exists(), "run started: {file}");
        let attached = run(gpulse(Some(SCENARIO)).current_dir(&dir).args([
            "attach",
            &pid,
            "--serve",
            "127.0.0.1:0",
            "--web-config",
            &file,
            "-o",
            "a.db",
        ]));
        assert_eq!((attached.0, attached.2.as_str()), (1, serve_err.as_str()), "attach, {file}");
        assert!(!dir.join("a.db").exists(), "attach started: {file}");
    }
    let _ = (target.kill(), target.wait());
    // Nothing to serve it on: refused by the parser.
    let (code, _, err) = run(gpulse(None).args(["run", "--web-config", "web.yml", "--", "true"]));
    assert!(code == 2 && err.contains("--serve"), "{err}");
}

/// SIGHUP to `serve`.
fn hang_up(s: &Serving) {
    // SAFETY: kill(2) on the server this test started.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGHUP) };
}

/// How many SIGHUPs `s` has finished with (each ends with the sessions' line).
fn hangups_done(s: &Serving) -> usize {
    s.later_lines().iter().filter(|l| l.ends_with("every session ended")).count()
}

#[test]
fn sighup_takes_a_renewed_certificate_and_new_users_and_a_broken_file_keeps_the_old() {
    let dir = fresh_dir("web-config", "sighup");
    let ca = TestCa::new(&dir);
    // Every certificate issued, in order: the server's is named by its place here.
    let issued = RefCell::new(vec![ca.issue(&dir)]);
    let web = write_web_yml(&dir, &bcrypt::hash(PASSWORD, 4).unwrap());
    let s = serve_started(&["--web-config", web.to_str().unwrap()]);
    // The status of a scrape with `password`, and which certificate the server presented.
    let metrics = |password: &str| {
        let (code, _, cert) = tls_get(&s.addr, &ca.file, "/metrics", Some(&format!("{USER}:{password}")));
        (code, cert.and_then(|c| issued.borrow().iter().position(|i| *i == c)))
    };
    let (first, second) = (Some(0), Some(1));
    wait_until(30, "the first sample, over TLS", || metrics(PASSWORD).0 == 200);
    assert_eq!(metrics(PASSWORD), (200, first));
    // What the start said after the address; SIGHUP's lines come after it.
    wait_until(30, "the start's last line", || s.later_lines().iter().any(|l| l.contains("Prometheus scrapes")));
    let start = s.later_lines().len();
    let since_start = || s.later_lines()[start..].to_vec();

    // Renewed in place: a new certificate and key in the same files, and a new password.
    issued.borrow_mut().push(ca.issue(&dir));
    assert_ne!(issued.borrow()[0], issued.borrow()[1]);
    const NEXT: &str = "a password of the renewal";
    let next_hash = bcrypt::hash(NEXT, 4).unwrap();
    write_web_yml(&dir, &next_hash);
    assert_eq!(metrics(PASSWORD), (200, first), "nothing is read again before SIGHUP");
    hang_up(&s);
    wait_until(30, "the SIGHUP", || hangups_done(&s) == 1);
    assert_eq!(metrics(NEXT), (200, second), "the new certificate and password");
    assert_eq!(metrics(PASSWORD).0, 401, "the old password, right a moment ago, is refused");
    assert_eq!(since_start(), ["gpulse: SIGHUP: the web configuration read again from its file, every session ended"]);

    // Broken files: one names a certificate that is not there, one drops TLS.
    let broken = [
        (
            format!(
                "tls_server_config:\n  cert_file: gone.pem\n  key_file: server-key.pem\nbasic_auth_users:\n  {USER}: {next_hash}\n"
            ),
            "gone.pem",
        ),
        (format!("basic_auth_users:\n  {USER}: {next_hash}\n"), "TLS is not turned off without a restart"),
    ];
    for (n, (yaml, why)) in broken.into_iter().enumerate() {
        private(&dir, "web.yml", &yaml);
        hang_up(&s);
        wait_until(30, "the SIGHUP", || hangups_done(&s) == n + 2);
        let said = &since_start()[2 * n + 1..];
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("gpulse: SIGHUP: ") && said[0].contains(why), "{said:?}");
        assert!(said[0].ends_with("; the old web configuration stays"), "{said:?}");
        assert_eq!(said[1], "gpulse: SIGHUP: every session ended");
        assert!(!said.concat().contains("$2"), "no hash is logged: {said:?}");
        assert_eq!(metrics(NEXT), (200, second), "still the renewal's certificate and password");
        assert_eq!(metrics(PASSWORD).0, 401);
    }
}
