//! Whose code a frame is: the job's own, a library's, gpulse's instrumentation, or code
//! `torch.compile` wrote. A sample is charged to the innermost frame of the job's own code.

use gpulse_model::PyFrame;

/// The modules of gpulse's own Python package, as `--instrument` puts them on the job's path
/// or the wheel installs them.
const GPULSE_MODULES: [&str; 7] =
    ["__init__.py", "_events.py", "_instrument.py", "_load.py", "lightning.py", "huggingface.py", "sitecustomize.py"];

/// Whether a frame is gpulse's own instrumentation: never the user's line.
pub(crate) fn gpulse_frame(file: &str) -> bool {
    let Some((dir, name)) = file.rsplit_once('/') else { return false };
    let parent = dir.rsplit('/').next().unwrap_or("");
    // The bootstrap's `sitecustomize.py` sits beside the package, in gpulse's private directory.
    (parent == "gpulse" && GPULSE_MODULES.contains(&name))
        || (name == "sitecustomize.py" && dir.contains("/gpulse-") && parent == "python")
}

/// Whether a frame is `--instrument`'s wrapper around a wait it times: a DataLoader's
/// `__next__`, a save, a copy. What runs under it is in a measured account already.
pub fn timed_by_gpulse(f: &PyFrame) -> bool {
    // Python 3.11 and later name a nested function by its qualified name.
    let name = f.function.rsplit('.').next().unwrap_or("");
    f.file.ends_with("/gpulse/_instrument.py") && matches!(name, "__next__" | "copy" | "save")
}

/// Whether a file is the job's own code rather than the interpreter's, a package's or gpulse's.
pub fn own_code(file: &str) -> bool {
    // PyTorch from a source checkout (`pip install -e`) lies outside site-packages; it is still
    // the library, not the job's line.
    !(gpulse_frame(file)
        || torch_source(file)
        || file.contains("/site-packages/")
        || file.contains("/dist-packages/")
        || compiled_code(file)
        || file.starts_with('<')
        || file.contains("/lib/python3")
        || file.contains("/lib64/python3"))
}

/// Whether a file is code that `torch.compile` wrote: Inductor's graphs and Triton kernels, each
/// `c` and 51 letters of a base-32 hash (`a-z`, `2-7`) in a folder named by the hash's 2nd and
/// 3rd, in `/tmp/torchinductor_USER` or wherever `TORCHINDUCTOR_CACHE_DIR` puts them. The line
/// that called the compiled model is the user's.
pub(crate) fn compiled_code(file: &str) -> bool {
    let mut parts = file.rsplit('/');
    let (Some(name), Some(dir)) = (parts.next(), parts.next()) else { return false };
    let Some(hash) = name.strip_suffix(".py") else { return false };
    hash.len() == 52
        && hash.starts_with('c')
        && hash.bytes().all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
        && dir == &hash[1..3]
}

/// Whether a file is PyTorch's own, wherever it is installed: under a `torch/` directory, one of
/// its subpackages or top-level modules (a project's own `torch/train.py` is not).
pub(crate) fn torch_source(file: &str) -> bool {
    const TOP: [&str; 22] = [
        "_",
        "nn/",
        "utils/",
        "optim/",
        "cuda/",
        "distributed/",
        "autograd/",
        "multiprocessing/",
        "fx/",
        "amp/",
        "backends/",
        "jit/",
        "onnx/",
        "export/",
        "compiler/",
        "ao/",
        "profiler/",
        "serialization.py",
        "functional.py",
        "__init__.py",
        "overrides.py",
        "storage.py",
    ];
    file.match_indices("/torch/").any(|(i, m)| TOP.iter().any(|t| file[i + m.len()..].starts_with(t)))
}

/// The path of an installed file below `site-packages` or `dist-packages`
/// (`torch/_dynamo/__init__.py`).
pub(crate) fn installed(file: &str) -> Option<&str> {
    file.split_once("/site-packages/").or_else(|| file.split_once("/dist-packages/")).map(|(_, rest)| rest)
}

/// The installed package a file belongs to: the folder (or module) under `site-packages` or
/// `dist-packages`.
pub(crate) fn package(file: &str) -> Option<&str> {
    let top = installed(file)?.split('/').next()?;
    Some(top.strip_suffix(".py").unwrap_or(top)).filter(|t| !t.is_empty())
}
