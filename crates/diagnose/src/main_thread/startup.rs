//! Start-up split by what the main thread did before the first step: imports, building the
//! dataset, building or loading the model, the CUDA context, compiling, starting the DataLoader,
//! or the job's own code, each with its most sampled line.

use std::collections::HashMap;

use gpulse_model::PyFrame;
use serde::Serialize;

use super::{points, site_text};
use crate::run::main_pid;
use crate::{Run, round};

gpulse_base::words! {
    /// What the main thread was doing during start-up.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Activity {
        /// The import system: `import torch`, `import transformers`.
        Imports => "imports",
        /// The CUDA context: torch's lazy CUDA initialisation.
        CudaContext => "cuda_context",
        /// `torch.compile` (Dynamo, Inductor) before the first step.
        Compile => "compile",
        /// Loading weights or a checkpoint: `torch.load`, safetensors, `from_pretrained`.
        LoadWeights => "load_weights",
        /// Building the model or moving it to the GPU: `torch.nn` modules' constructors and `.to()`.
        BuildModel => "build_model",
        /// Building a dataset: Hugging Face `datasets`, torchvision's datasets.
        BuildDataset => "build_dataset",
        /// The DataLoader starting its workers and fetching the first batch.
        FirstBatch => "first_batch",
        /// Anything else: the job's own code at its line.
        OwnCode => "own_code",
    }
}

impl Activity {
    pub const fn words(self) -> &'static str {
        match self {
            Activity::Imports => "importing modules",
            Activity::CudaContext => "creating the CUDA context",
            Activity::Compile => "compiling (torch.compile)",
            Activity::LoadWeights => "loading weights",
            Activity::BuildModel => "building the model or moving it to the GPU",
            Activity::BuildDataset => "building the dataset",
            Activity::FirstBatch => "starting the DataLoader and its first batch",
            Activity::OwnCode => "running the job's own code",
        }
    }

    /// What to do where this activity takes most of the start-up.
    pub const fn advice(self) -> &'static str {
        match self {
            Activity::Imports => {
                "imports take most of the start-up: `python -X importtime` names the slow ones; import heavy modules only where they are used"
            }
            Activity::CudaContext => {
                "creating the CUDA context takes most of it: CUDA_MODULE_LOADING=LAZY (the default since CUDA 11.7) loads kernels as used; check no other process holds the GPU"
            }
            Activity::Compile => {
                "torch.compile compiles before the first step: keep its caches between runs (TORCHINDUCTOR_FX_GRAPH_CACHE=1, TORCHINDUCTOR_CACHE_DIR on persistent disk), compile only the hot module, or mode=\"default\" rather than max-autotune"
            }
            Activity::LoadWeights => {
                "loading weights takes most of it: safetensors, torch.load(..., mmap=True), or from_pretrained(..., device_map=\"cuda\") to load straight to the GPU"
            }
            Activity::BuildModel => {
                "building the model takes most of it: build it on the meta device (torch.device(\"meta\")) or straight on the GPU (with torch.device(\"cuda\"):) rather than on the CPU and moving it"
            }
            Activity::BuildDataset => {
                "building the dataset takes most of it: load or index it lazily (in __getitem__, or memory-mapped) and cache preprocessing on disk instead of redoing it at each start"
            }
            Activity::FirstBatch => {
                "starting the DataLoader takes most of it: a slow Dataset __init__ or worker_init_fn delays the first batch; persistent_workers=True pays it once"
            }
            Activity::OwnCode => {
                "the job's own code takes most of it, at the line named: time it, and cache what it builds"
            }
        }
    }
}

/// Whether a path lies in a package, by its components.
fn under(file: &str, package: &str) -> bool {
    file.starts_with(package) || file.contains(&format!("/{package}"))
}

/// The activity of one stack, outermost first. An import the job's own line runs is the
/// imports' time; inside a library's work (`torch.compile` importing Inductor's modules as it
/// goes) it is that work's. Among libraries the innermost wins, so a CUDA context created inside
/// `.to("cuda")` is the context's time.
pub fn activity(frames: &[&PyFrame]) -> Activity {
    let import_at = frames.iter().position(|f| f.file.starts_with("<frozen importlib")).unwrap_or(frames.len());
    let outer = &frames[..import_at];
    let found = library(outer);
    match found {
        Some(a) => a,
        None if import_at < frames.len() => Activity::Imports,
        None => Activity::OwnCode,
    }
}

/// The innermost library frame of `frames` that names an activity.
fn library(frames: &[&PyFrame]) -> Option<Activity> {
    for f in frames.iter().rev() {
        let p = f.file.as_str();
        let a = if under(p, "torch/cuda/__init__.py") && matches!(f.function.as_str(), "_lazy_init" | "init") {
            Activity::CudaContext
        } else if under(p, "torch/_dynamo/") || under(p, "torch/_inductor/") {
            Activity::Compile
        } else if under(p, "torch/serialization.py") || under(p, "safetensors/") || f.function == "from_pretrained" {
            Activity::LoadWeights
        } else if under(p, "torch/nn/modules/") || under(p, "torch/nn/init.py") {
            Activity::BuildModel
        } else if under(p, "datasets/") || under(p, "torchvision/datasets/") {
            Activity::BuildDataset
        } else if under(p, "torch/utils/data/") {
            Activity::FirstBatch
        } else {
            continue;
        };
        return Some(a);
    }
    None
}

/// One activity's part of the start-up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupPart {
    pub activity: Activity,
    pub seconds: f64,
    /// Of the start-up's sampled time.
    pub share: f64,
    /// Its most sampled line of the job's own code (the line that called into the library).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// For imports, the module its line imported (`torch._dynamo`), where one module or package
    /// was most of that line's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

impl StartupPart {
    /// What the main thread was doing, in words: "importing torch._dynamo" where one module
    /// was most of the imports.
    pub fn doing(&self) -> String {
        match &self.module {
            Some(m) => format!("importing {m}"),
            None => self.activity.words().to_owned(),
        }
    }
}

/// The module an import stack is importing: the outermost module body run by the import
/// system, named from its file (`…/site-packages/torch/_dynamo/__init__.py` is `torch._dynamo`).
pub(super) fn imported(frames: &[&PyFrame]) -> Option<String> {
    let at = frames.iter().position(|f| f.file.starts_with("<frozen importlib"))?;
    let body = frames[at..].iter().find(|f| f.function == "<module>" && !f.file.starts_with('<'))?;
    Some(module_name(&body.file))
}

/// A module's dotted name from its file: the path below `site-packages`, `dist-packages` or
/// the standard library's `pythonX.Y`, else the file's own name.
fn module_name(file: &str) -> String {
    let below = super::own::installed(file)
        .or_else(|| {
            let i = file.rfind("/python3.")?;
            file[i + 1..].split_once('/').map(|(_, rest)| rest)
        })
        // Elsewhere (the job's own package), its file's name, or its folder's for a package's
        // `__init__.py`.
        .unwrap_or_else(|| {
            let mut parts = file.rsplit('/');
            let name = parts.next().unwrap_or(file);
            match (name, parts.next()) {
                ("__init__.py", Some(folder)) if !folder.is_empty() => folder,
                _ => name,
            }
        });
    let path = below.strip_suffix(".py").unwrap_or(below);
    let path = path.strip_suffix("/__init__").unwrap_or(path);
    path.replace('/', ".")
}

/// The main thread's start-up, `[0, end_s]`, by activity, largest first; empty where fewer than
/// [`MIN_SAMPLES`] samples cover it.
pub(crate) fn split(run: &Run, end_s: f64) -> Vec<StartupPart> {
    split_within(run, [f64::NEG_INFINITY, end_s])
}

/// A start-up account's label with what the main thread did in `window_s`: its largest activity
/// and every other of a fifth of it or more, largest first, each with its line ("…: importing torch at train.py:3
/// <module>"); `base` alone where too few samples cover it. No shares: the label names a
/// `/metrics` series, which a share changing with each live diagnosis would multiply.
pub(crate) fn labelled(run: &Run, base: &str, window_s: [f64; 2]) -> String {
    let parts = split_within(run, window_s);
    let named: Vec<String> = parts
        .iter()
        .enumerate()
        .filter(|(i, p)| *i == 0 || p.share >= NAMED_SHARE)
        .map(|(_, p)| {
            let at = p.site.as_deref().map(|s| format!(" at {s}")).unwrap_or_default();
            format!("{}{at}", p.doing())
        })
        .collect();
    match named.is_empty() {
        true => base.to_owned(),
        false => format!("{}: {}", base.split(" (").next().unwrap_or(base), named.join("; ")),
    }
}

/// An activity of less than this share of a start-up is not named in its account's label.
const NAMED_SHARE: f64 = 0.2;

/// The main thread's samples in `window_s` (from its start, through its end) by activity.
fn split_within(run: &Run, [from_s, to_s]: [f64; 2]) -> Vec<StartupPart> {
    let Some(pid) = main_pid(run) else { return Vec::new() };
    let pts: Vec<_> = points(run, pid).iter().copied().filter(|p| p.t_s >= from_s && p.t_s <= to_s).collect();
    if pts.iter().filter(|p| !p.split).count() < MIN_SAMPLES {
        return Vec::new();
    }
    let mut by_stack: HashMap<u32, f64> = HashMap::new();
    for p in &pts {
        *by_stack.entry(p.stack).or_default() += p.dur_s;
    }
    // Per activity its seconds, and per site its seconds and the modules imported there.
    type Site = (f64, HashMap<String, f64>);
    let mut by: HashMap<Activity, (f64, HashMap<Option<String>, Site>)> = HashMap::new();
    for (stack, secs) in by_stack {
        let frames: Vec<&PyFrame> = run.stacks.frames_of(stack).collect();
        let a = activity(&frames);
        let e = by.entry(a).or_default();
        e.0 += secs;
        let site = e.1.entry(site_text(&run.stacks, stack)).or_default();
        site.0 += secs;
        if let Some(m) = Some(a).filter(|a| *a == Activity::Imports).and_then(|_| imported(&frames)) {
            *site.1.entry(m).or_default() += secs;
        }
    }
    let total: f64 = by.values().map(|v| v.0).sum::<f64>().max(1e-9);
    let mut out: Vec<StartupPart> = by
        .into_iter()
        .map(|(activity, (secs, sites))| {
            // The most sampled line, and what it imported: "importing torchvision at train.py:9"
            // beside "import torch" two lines up.
            let top = sites
                .into_iter()
                .filter_map(|(site, v)| Some((site?, v)))
                .max_by(|a, b| a.1.0.total_cmp(&b.1.0).then_with(|| b.0.cmp(&a.0)));
            let (site, module) = match top {
                Some((site, (s, modules))) => (Some(site), imported_most(modules, s)),
                None => (None, None),
            };
            StartupPart { activity, seconds: round(secs, 2), share: round(secs / total, 3), site, module }
        })
        .collect();
    out.sort_by(|a, b| b.seconds.total_cmp(&a.seconds).then(a.activity.cmp(&b.activity)));
    out
}

/// The module that was most of `secs` of imports (`torch._dynamo`), else the package whose
/// modules together were (`transformers`, its models' configurations one after another), else
/// none.
fn imported_most(modules: HashMap<String, f64>, secs: f64) -> Option<String> {
    let most = |m: HashMap<String, f64>| {
        m.into_iter()
            .filter(|m| 2.0 * m.1 > secs)
            .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|m| m.0)
    };
    let mut packages: HashMap<String, f64> = HashMap::new();
    for (m, s) in &modules {
        *packages.entry(m.split('.').next().unwrap_or(m).to_owned()).or_default() += s;
    }
    most(modules).or_else(|| most(packages))
}

/// Fewer samples than this say too little of a start-up to split it.
const MIN_SAMPLES: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(file: &str, function: &str) -> PyFrame {
        PyFrame { file: file.into(), line: 1, function: function.into(), code: None }
    }

    /// The job's own `import` is the imports' time; an import that torch.compile runs as it goes
    /// is the compile's; a context created inside `.cuda()` is the context's.
    #[test]
    fn each_stack_is_the_work_it_is_part_of() {
        let sp = "/venv/lib/python3.12/site-packages";
        let train = frame("/w/train.py", "<module>");
        let importlib = frame("<frozen importlib._bootstrap>", "_find_and_load");
        let import = [&train, &importlib, &frame(&format!("{sp}/transformers/__init__.py"), "<module>")];
        assert_eq!(activity(&import), Activity::Imports);
        let dynamo = frame(&format!("{sp}/torch/_dynamo/eval_frame.py"), "_fn");
        let compile_import =
            [&train, &dynamo, &importlib, &frame(&format!("{sp}/torch/_inductor/codecache.py"), "<module>")];
        assert_eq!(activity(&compile_import), Activity::Compile);
        let to = frame(&format!("{sp}/torch/nn/modules/module.py"), "_apply");
        let lazy = frame(&format!("{sp}/torch/cuda/__init__.py"), "_lazy_init");
        assert_eq!(activity(&[&train, &to, &lazy]), Activity::CudaContext);
        assert_eq!(activity(&[&train, &to]), Activity::BuildModel);
        assert_eq!(activity(&[&train]), Activity::OwnCode);
    }

    #[test]
    fn the_module_named_is_most_of_the_imports_else_its_package() {
        let m = |v: &[(&str, f64)]| v.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect::<HashMap<_, _>>();
        assert_eq!(imported_most(m(&[("torch._dynamo", 6.0), ("torch", 1.0)]), 7.0).as_deref(), Some("torch._dynamo"));
        let configs = m(&[
            ("transformers.models.bert.configuration_bert", 3.0),
            ("transformers.models.auto", 3.0),
            ("numpy", 1.0),
        ]);
        assert_eq!(imported_most(configs, 7.0).as_deref(), Some("transformers"));
        assert_eq!(imported_most(m(&[("torch", 3.0), ("numpy", 3.0), ("PIL", 3.0)]), 9.0), None, "no majority");
    }

    #[test]
    fn a_module_is_named_from_its_file() {
        let sp = "/venv/lib/python3.12/site-packages";
        assert_eq!(module_name(&format!("{sp}/torch/_dynamo/__init__.py")), "torch._dynamo");
        assert_eq!(
            module_name(&format!("{sp}/transformers/models/gpt2/modeling_gpt2.py")),
            "transformers.models.gpt2.modeling_gpt2"
        );
        assert_eq!(module_name("/usr/lib/python3.12/dist-packages/numpy/__init__.py"), "numpy");
        assert_eq!(module_name("/usr/lib/python3.12/json/decoder.py"), "json.decoder");
        assert_eq!(module_name("/w/helpers.py"), "helpers");
        assert_eq!(module_name("/w/mypkg/__init__.py"), "mypkg", "the job's own package, by its folder");
    }

    /// Seven seconds of `import torch._dynamo` under the job's line, then two of its own code:
    /// the account names the module, its line and the second activity, and the ledger prints it.
    #[test]
    fn a_start_up_account_names_what_the_main_thread_did() {
        use super::super::tests::{run, sample};
        let mut r = run(90.0, &[(0, 100)]);
        let st = std::sync::Arc::make_mut(&mut r.stacks);
        st.frames.push(frame("<frozen importlib._bootstrap>", "_find_and_load"));
        st.frames.push(frame("/v/site-packages/torch/_dynamo/__init__.py", "<module>"));
        st.frames.push(frame("/v/site-packages/torch/_dynamo/convert_frame.py", "<module>"));
        let (importlib, dynamo, convert) =
            (st.frames.len() as u32 - 3, st.frames.len() as u32 - 2, st.frames.len() as u32 - 1);
        st.stacks.push(vec![0, importlib, dynamo, importlib, convert]);
        let importing = st.stacks.len() as u32 - 1;
        let mut early: Vec<_> =
            (100..1000).map(|i| sample(f64::from(i) / 100.0, if i < 800 { importing } else { 1 })).collect();
        for s in &mut early {
            s.kernel.state = 'R';
        }
        early.append(&mut st.samples);
        st.samples = early;
        let label = labelled(&r, "start-up", [0.0, 10.0]);
        assert!(label.starts_with("start-up: importing torch._dynamo at "), "{label}");
        assert!(label.contains("train.py:80 main; running the job's own code at w/train.py:52 train"), "{label}");
        assert_eq!(labelled(&r, "start-up (imports)", [90.0, 100.0]), "start-up (imports)", "no samples, no split");
        let ledger = crate::ledger::ledger(&r, &[]);
        assert!(ledger.accounts.iter().any(|a| a.label == label), "{ledger:#?}");
        // The profile's line says what its time was: the import, not the job's own Python.
        let profile = &super::super::profiles(&r)[0];
        let sites: Vec<_> = profile.states.iter().flat_map(|s| &s.sites).collect();
        let at = |line: &str| sites.iter().find(|s| s.site.contains(line)).unwrap_or_else(|| panic!("{sites:#?}"));
        assert_eq!(at("train.py:80 ").doing.as_deref(), Some("importing torch._dynamo"), "{sites:#?}");
        assert_eq!(at("train.py:52 ").doing, None, "{sites:#?}");
    }
}
