//! `serve`'s token from a file: only a private regular file holding a strong token is read, and
//! no more of it than a line; SIGHUP reads it again and ends every session.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::serve::{get, serve};
use super::support::{fresh_dir, gpulse, run};

const STRONG: &str = "9f2c4e6a8b0d1f3e5a7c9e1b3d5f7a9c";
const NEXT: &str = "1a3c5e7f9b2d4f6a8c0e2b4d6f8a0c2e";

fn write_private(path: &std::path::Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn only_a_private_file_with_a_strong_token_is_read() {
    let dir = fresh_dir("serve_secrets", "files");
    let fifo = dir.join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let cases: Vec<(std::path::PathBuf, &str)> = vec![
        ("/dev/zero".into(), "is not a regular file"),
        (fifo, "is not a regular file"),
        (dir.join("open"), "can be read by every user (mode 644); make it private: chmod 600"),
        (dir.join("weak"), "is too weak: about 80 bits"),
        (dir.join("binary"), "holds characters other than printable ASCII"),
        (dir.join("missing"), "cannot read"),
    ];
    write_private(&dir.join("open"), &format!("{STRONG}\n"), 0o644);
    write_private(&dir.join("weak"), "0123456789abcdef0123\n", 0o600);
    write_private(&dir.join("binary"), "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 0o600);
    for (path, why) in cases {
        let (code, _, err) = run(gpulse(Some("scenarios/serve_three_gpus.json"))
            .args(["serve", "--listen", "127.0.0.1:0", "--duration", "5s", "--token-file"])
            .arg(&path));
        assert_eq!(code, 1, "{}: {err}", path.display());
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("gpulse: ") && err.contains(why) && err.contains(&*path.to_string_lossy()), "{err}");
    }
    // A long file: its first line is the token, and only the start of it is read.
    let long = dir.join("long");
    write_private(&long, &format!("{STRONG}\n{}", "x".repeat(50 << 20)), 0o600);
    let s = serve(&["--token-file", &long.display().to_string()]);
    assert_eq!(get(&s.addr, "/api/v1/snapshot", &[("Authorization", &format!("Bearer {STRONG}"))]).0, 200);
}

#[test]
fn sighup_reads_the_token_file_again_and_ends_every_session() {
    let dir = fresh_dir("serve_secrets", "reload");
    let file = dir.join("token");
    write_private(&file, &format!("{STRONG}\n"), 0o600);
    let s = serve(&["--token-file", &file.display().to_string()]);
    let (code, head, _) = get(&s.addr, &format!("/?token={STRONG}"), &[]);
    assert_eq!(code, 303);
    let cookie =
        head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap().split(';').next().unwrap().to_owned();
    let with_cookie = |addr: &str| get(addr, "/api/v1/snapshot", &[("Cookie", &cookie)]).0;
    assert_eq!(with_cookie(&s.addr), 200);
    write_private(&file, &format!("{NEXT}\n"), 0o600);
    // SAFETY: kill(2) on the server this test started.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGHUP) };
    let bearer = |t: &str| get(&s.addr, "/api/v1/snapshot", &[("Authorization", &format!("Bearer {t}"))]).0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while bearer(NEXT) != 200 {
        assert!(Instant::now() < deadline, "the new token never took");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(bearer(STRONG), 401, "the old token is gone");
    assert_eq!(with_cookie(&s.addr), 401, "the old session ended");
    assert_eq!(get(&s.addr, "/healthz", &[]).0, 200, "still serving after SIGHUP");
}
