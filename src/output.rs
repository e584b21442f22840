//! Where command output goes: standard output, a stream, or a file that appears whole.
//!
//! `-o PATH` never costs the user what they had: symlinks are followed to their target, FIFOs and
//! character devices are written straight through, an input or a recording is never replaced,
//! and a regular file is written beside its target and renamed over it only when complete.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use gpulse_input::TempPath;
use gpulse_record::SQLITE_MAGIC;

/// A line-oriented sink. A closed pipe ends the command quietly, as `head` expects.
pub struct Output {
    inner: Box<dyn Write>,
}

impl Output {
    /// Standard output, or `path` written as it goes (a log that grows while a loop runs).
    /// An existing recording is refused.
    pub fn open(path: Option<&Path>) -> anyhow::Result<Self> {
        let dest = path.map(|p| destination(p, &[])).transpose()?.unwrap_or(Dest::Stdout);
        let cannot = |e: io::Error| anyhow::anyhow!("cannot write {}: {e}", path.unwrap_or(Path::new("-")).display());
        let inner = match open_in_place(dest).map_err(cannot)? {
            Opened::InPlace(w) => w,
            // nvidia-smi's `-f` starts the file afresh, and so does gpulse's.
            Opened::File(p) => Box::new(BufWriter::new(File::create(p).map_err(cannot)?)),
        };
        Ok(Self { inner })
    }

    /// Writes `text` and flushes, so a reader of a loop sees each sample as it is taken.
    pub fn emit(&mut self, text: &str) -> io::Result<()> {
        self.inner.write_all(text.as_bytes())?;
        self.inner.flush()
    }
}

/// The columns text for a reader wraps at: the terminal's, where `fd` is one (at least 40),
/// else 80, as for a pipe or a file.
pub fn text_width(fd: libc::c_int) -> usize {
    // SAFETY: an all-zero winsize is a valid value of this plain C struct.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which outlives the call.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_col > 0 { usize::from(ws.ws_col).max(40) } else { 80 }
}

/// Whether an I/O error means the reader went away.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

/// What `-o PATH` names, once links are followed.
#[derive(Debug, PartialEq, Eq)]
pub enum Dest {
    /// `-`.
    Stdout,
    /// `/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`: this process's open descriptor, written as
    /// it is (reopening it would lose a shell's `>>`).
    Descriptor(i32),
    /// A FIFO, a character device or an open descriptor (`/dev/stdout`): written in place,
    /// never replaced.
    Stream(PathBuf),
    /// A regular file, existing or not: the final target of any symlinks.
    File(PathBuf),
}

/// Resolves `path` and refuses what must not be written: one of `inputs`, an existing
/// recording, a directory or a block device.
pub fn destination(path: &Path, inputs: &[&Path]) -> anyhow::Result<Dest> {
    if path.as_os_str() == "-" {
        return Ok(Dest::Stdout);
    }
    let shown = path.display();
    let target = match follow_links(path).map_err(|e| anyhow::anyhow!("cannot write {shown}: {e}"))? {
        Hop::Path(p) => p,
        Hop::Descriptor(fd) => return Ok(Dest::Descriptor(fd)),
        // Another process's descriptor: appended to, never truncated.
        Hop::Proc(p) => return Ok(Dest::Stream(p)),
    };
    let meta = match fs::metadata(&target) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Dest::File(target)),
        Err(e) => anyhow::bail!("cannot write {shown}: {e}"),
    };
    let kind = meta.file_type();
    if kind.is_fifo() || kind.is_char_device() {
        return Ok(Dest::Stream(target));
    }
    anyhow::ensure!(!kind.is_dir(), "cannot write {shown}: it is a directory");
    anyhow::ensure!(kind.is_file(), "cannot write {shown}: it is a device or socket, not a file");
    for input in inputs {
        let same = fs::metadata(input).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        anyhow::ensure!(!same, "{shown} is the input {}; write the output to another file", input.display());
    }
    let head = read_head(&target).map_err(|e| {
        anyhow::anyhow!("cannot tell whether {shown} is a recording ({e}); gpulse replaces nothing it cannot read")
    })?;
    anyhow::ensure!(
        !head.starts_with(SQLITE_MAGIC),
        "{shown} is a recording; gpulse never replaces one, choose another -o"
    );
    anyhow::ensure!(
        !is_sqlite_side_file(&target, &head),
        "{shown} holds part of a recording (its write-ahead log or journal); gpulse never replaces one"
    );
    Ok(Dest::File(target))
}

/// Whether two resolved destinations are one file: the same inode where it exists, else the
/// same canonical folder and name (`./r.html` and `r.html`).
pub fn same_destination(a: &Dest, b: &Dest) -> bool {
    let place = |p: &Path| -> Option<PathBuf> {
        let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Some(fs::canonicalize(parent).ok()?.join(p.file_name()?))
    };
    match (a, b) {
        (Dest::Stdout, Dest::Stdout) => true,
        (Dest::Descriptor(x), Dest::Descriptor(y)) => x == y,
        (Dest::File(x) | Dest::Stream(x), Dest::File(y) | Dest::Stream(y)) => {
            match (fs::metadata(x), fs::metadata(y)) {
                (Ok(m), Ok(n)) => m.dev() == n.dev() && m.ino() == n.ino(),
                _ => place(x).is_some_and(|p| Some(p) == place(y)),
            }
        }
        _ => false,
    }
}

/// Writes `bytes` to `path` as [`destination`] resolves it: a regular file appears complete or
/// not at all, keeping the mode of the file it replaces.
pub fn write_whole(path: &Path, inputs: &[&Path], bytes: &[u8]) -> anyhow::Result<()> {
    let cannot = |e: io::Error| anyhow::anyhow!("cannot write {}: {e}", path.display());
    match open_in_place(destination(path, inputs)?).map_err(cannot)? {
        // Context, not a new message: a closed pipe must still read as one (see is_broken_pipe).
        Opened::InPlace(mut w) => w
            .write_all(bytes)
            .and_then(|()| w.flush())
            .map_err(|e| anyhow::Error::from(e).context(format!("cannot write {}", path.display())))?,
        Opened::File(p) => {
            let tmp = TempPath::beside(&p);
            let mut f = File::create(&tmp.0).map_err(cannot)?;
            f.write_all(bytes).and_then(|()| f.sync_all()).map_err(cannot)?;
            if let Ok(old) = fs::metadata(&p) {
                let _ = fs::set_permissions(&tmp.0, old.permissions());
            }
            fs::rename(&tmp.0, &p).map_err(cannot)?;
        }
    }
    Ok(())
}

/// A destination ready to write.
enum Opened {
    /// Standard output, one of this process's inherited descriptors (duplicated, so the caller's
    /// offset and `O_APPEND` hold), or a stream appended to.
    InPlace(Box<dyn Write>),
    /// A regular file, which each caller writes its own way.
    File(PathBuf),
}

fn open_in_place(dest: Dest) -> io::Result<Opened> {
    let w: Box<dyn Write> = match dest {
        Dest::Stdout | Dest::Descriptor(1) => Box::new(BufWriter::new(io::stdout().lock())),
        Dest::Descriptor(fd) => {
            use std::os::fd::FromRawFd;
            // SAFETY: dup(2) of a descriptor checked open gives one this File owns alone.
            let dup = unsafe { libc::dup(fd) };
            if dup < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `dup` was just created and is owned by nothing else.
            Box::new(BufWriter::new(unsafe { File::from_raw_fd(dup) }))
        }
        Dest::Stream(p) => Box::new(BufWriter::new(fs::OpenOptions::new().append(true).open(p)?)),
        Dest::File(p) => return Ok(Opened::File(p)),
    };
    Ok(Opened::InPlace(w))
}

/// Moves the finished file `from` to `to` only if `to` does not exist: a hard link cannot
/// replace anything, so two writers racing for one name cannot lose either file.
pub fn publish_new(from: &Path, to: &Path) -> anyhow::Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => {
            let _ = fs::remove_file(from);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            anyhow::bail!("{} already exists; write to a new file", to.display())
        }
        // A file system without hard links: the existence check is the best left (a dangling
        // symlink exists too).
        Err(_) if fs::symlink_metadata(to).is_err() => {
            fs::rename(from, to).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", to.display()))
        }
        Err(e) => anyhow::bail!("cannot create {}: {e}", to.display()),
    }
}

/// Whether `path` starts like a SQLite database.
pub fn is_sqlite(path: &Path) -> bool {
    read_head(path).is_ok_and(|h| h.starts_with(SQLITE_MAGIC))
}

/// The first 16 bytes of an existing file (fewer if it is shorter).
fn read_head(path: &Path) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(16);
    File::open(path)?.take(16).read_to_end(&mut head)?;
    Ok(head)
}

/// A recording's write-ahead log or rollback journal: by its own magic number, or by its name
/// beside a SQLite file. Replacing one loses what the recording has not yet checkpointed.
fn is_sqlite_side_file(path: &Path, head: &[u8]) -> bool {
    const WAL: [[u8; 4]; 2] = [[0x37, 0x7f, 0x06, 0x82], [0x37, 0x7f, 0x06, 0x83]];
    const JOURNAL: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];
    if WAL.iter().any(|m| head.starts_with(m)) || head.starts_with(&JOURNAL) {
        return true;
    }
    let name = path.as_os_str().to_string_lossy();
    gpulse_record::SIDE_FILES.iter().any(|s| name.strip_suffix(s).is_some_and(|base| is_sqlite(Path::new(base))))
}

/// The descriptors this process was started with, noted by `main` before it opens anything, so
/// that `-o /dev/fd/N` can name only those and never one of gpulse's own (NVML's, SQLite's).
static INHERITED: std::sync::OnceLock<Vec<i32>> = std::sync::OnceLock::new();

/// Notes the descriptors open now; call first thing.
pub fn note_inherited_descriptors() {
    let open = fs::read_dir("/proc/self/fd")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_else(|_| vec![0, 1, 2]);
    let _ = INHERITED.set(open);
}

/// The descriptor a path names in this process, if it names one it was started with.
fn own_descriptor(path: &Path) -> Option<i32> {
    let s = path.to_str()?;
    let me = format!("/proc/{}/fd/", std::process::id());
    let fd = match s {
        "/dev/stdin" => "0",
        "/dev/stdout" => "1",
        "/dev/stderr" => "2",
        _ => ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", &me].iter().find_map(|p| s.strip_prefix(p))?,
    };
    let fd: i32 = fd.parse().ok()?;
    let inherited = INHERITED.get().is_none_or(|fds| fds.contains(&fd));
    // SAFETY: fcntl(F_GETFD) only asks whether the descriptor is open.
    (inherited && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0).then_some(fd)
}

/// Where a chain of symlinks ends.
enum Hop {
    /// A path, which may not exist yet.
    Path(PathBuf),
    /// One of this process's descriptors (`/dev/stdout`, through any spelling or link).
    Descriptor(i32),
    /// Somewhere in `/proc` that only the kernel can follow.
    Proc(PathBuf),
}

/// `path` with `.` and repeated slashes gone, so `/dev/./stdout` and `//dev/stdout` are seen as
/// `/dev/stdout` (`..` stays: after a symlink it means something else).
fn tidy(path: &Path) -> PathBuf {
    path.components().filter(|c| *c != std::path::Component::CurDir).collect()
}

/// Follows symlinks one hop at a time, stopping at this process's descriptors and at `/proc`.
fn follow_links(path: &Path) -> io::Result<Hop> {
    let mut p = tidy(path);
    for _ in 0..40 {
        if let Some(fd) = own_descriptor(&p) {
            return Ok(Hop::Descriptor(fd));
        }
        if p.starts_with("/proc") || p.starts_with("/dev/fd") {
            return Ok(Hop::Proc(p));
        }
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&p)?;
                p = tidy(&match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                });
            }
            Ok(_) => return Ok(Hop::Path(p)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Hop::Path(p)),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("gpulse-output-{name}-")).tempdir().unwrap()
    }

    #[test]
    fn follows_relative_and_chained_links() {
        let d_tmp = dir("links");
        let d = d_tmp.path();
        fs::write(d.join("real.csv"), "old").unwrap();
        std::os::unix::fs::symlink("real.csv", d.join("a")).unwrap();
        std::os::unix::fs::symlink(d.join("a"), d.join("b")).unwrap();
        write_whole(&d.join("b"), &[], b"new").unwrap();
        assert!(fs::symlink_metadata(d.join("a")).unwrap().file_type().is_symlink());
        assert!(fs::symlink_metadata(d.join("b")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(d.join("real.csv")).unwrap(), "new");
        // A dangling link creates its target.
        std::os::unix::fs::symlink("later.csv", d.join("c")).unwrap();
        write_whole(&d.join("c"), &[], b"x").unwrap();
        assert_eq!(fs::read_to_string(d.join("later.csv")).unwrap(), "x");
    }

    #[test]
    fn refuses_inputs_recordings_and_directories() {
        let d_tmp = dir("refuse");
        let d = d_tmp.path();
        let input = d.join("in.csv");
        fs::write(&input, "keep").unwrap();
        fs::hard_link(&input, d.join("same")).unwrap();
        assert!(write_whole(&d.join("same"), &[&input], b"x").is_err());
        assert_eq!(fs::read_to_string(&input).unwrap(), "keep");
        let db = d.join("r.db");
        fs::write(&db, [SQLITE_MAGIC, b"rest"].concat()).unwrap();
        let e = write_whole(&db, &[], b"x").unwrap_err().to_string();
        assert!(e.contains("is a recording"), "{e}");
        assert!(fs::read(&db).unwrap().starts_with(SQLITE_MAGIC));
        assert!(write_whole(d, &[], b"x").unwrap_err().to_string().contains("directory"));
        // Other regular files are replaced, keeping their mode.
        let other = d.join("other.csv");
        fs::write(&other, "old").unwrap();
        fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
        write_whole(&other, &[&input], b"new").unwrap();
        assert_eq!(fs::read_to_string(&other).unwrap(), "new");
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&fs::metadata(&other).unwrap().permissions()) & 0o777,
            0o640
        );
        assert_eq!(fs::read_dir(d).unwrap().count(), 4, "no temporary file left behind");
    }

    #[test]
    fn a_recordings_log_and_journal_are_never_replaced() {
        let d_tmp = dir("side");
        let d = d_tmp.path();
        fs::write(d.join("r.db"), [SQLITE_MAGIC, b"rest"].concat()).unwrap();
        // Named beside the recording, whatever they hold (an empty -shm, a log not yet written).
        for side in ["r.db-wal", "r.db-shm", "r.db-journal"] {
            fs::write(d.join(side), b"").unwrap();
            let e = write_whole(&d.join(side), &[], b"x").unwrap_err().to_string();
            assert!(e.contains("part of a recording"), "{side}: {e}");
        }
        // A write-ahead log by its magic, under any name.
        fs::write(d.join("copied"), [0x37, 0x7f, 0x06, 0x82, 0, 0, 0, 0]).unwrap();
        assert!(write_whole(&d.join("copied"), &[], b"x").is_err());
        assert_eq!(fs::read(d.join("copied")).unwrap()[..4], [0x37, 0x7f, 0x06, 0x82]);
        // A -wal beside a file that is no recording is an ordinary file.
        fs::write(d.join("notes.txt"), "words").unwrap();
        fs::write(d.join("notes.txt-wal"), "old").unwrap();
        write_whole(&d.join("notes.txt-wal"), &[], b"new").unwrap();
    }

    #[test]
    fn every_spelling_of_stdout_is_this_processs_descriptor() {
        for s in ["/dev/stdout", "/dev/./stdout", "//dev/stdout", "/proc/self/fd/1", "/dev/fd/1"] {
            assert_eq!(destination(Path::new(s), &[]).unwrap(), Dest::Descriptor(1), "{s}");
        }
        let d_tmp = dir("stdout-link");
        let d = d_tmp.path();
        std::os::unix::fs::symlink("/dev/stdout", d.join("out")).unwrap();
        assert_eq!(destination(&d.join("out"), &[]).unwrap(), Dest::Descriptor(1));
    }

    #[test]
    fn publish_never_replaces() {
        let d_tmp = dir("publish");
        let d = d_tmp.path();
        fs::write(d.join("a"), "a").unwrap();
        fs::write(d.join("b"), "b").unwrap();
        assert!(publish_new(&d.join("a"), &d.join("b")).is_err());
        assert_eq!(fs::read_to_string(d.join("b")).unwrap(), "b");
        publish_new(&d.join("a"), &d.join("c")).unwrap();
        assert_eq!(fs::read_to_string(d.join("c")).unwrap(), "a");
        assert!(!d.join("a").exists());
    }
}
