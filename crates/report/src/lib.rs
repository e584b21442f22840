//! Every rendering of a diagnosis and a poll, for a terminal, a file or a browser: the text and
//! JSON diagnosis, the HTML report, the status block, `watch`'s lines and the compare table.
//!
//! It reads the model and the diagnosis only; it never samples and never opens a recording.

pub mod compare;
pub mod csv;
pub mod folded;
pub mod html;
#[cfg(feature = "png")]
pub mod png;
pub mod row;
/// Built without the `png` feature: the report is HTML only.
#[cfg(not(feature = "png"))]
pub mod png {
    pub struct Png {
        pub bytes: Vec<u8>,
        pub has_text: bool,
    }

    pub fn render(_svg: &str) -> Result<Png, String> {
        Err(super::NO_PNG.to_owned())
    }
}

/// Whether this build draws the report as a PNG.
pub const PNG: bool = cfg!(feature = "png");

/// What a build without the `png` feature says when asked for one.
pub const NO_PNG: &str = "this gpulse was built without PNG output (build it with the default features, or `--features png`); the HTML report has the same charts";
pub mod prometheus;
pub mod snapshot;
pub mod speedscope;
pub mod status;
pub mod text;
pub mod watch;

/// A run and its one analysis, with what the renderers say of its input. Renderers only render
/// it: none works out findings, ledger, roofline or profiles again.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    pub run: gpulse_diagnose::Run,
    pub diagnosis: gpulse_diagnose::Diagnosis,
    pub gpus: usize,
    pub samples: usize,
    /// The command that ran, where the recording names it.
    pub command: Option<String>,
    /// The loop's named phases (checkpoint, eval): name, start and length, seconds.
    pub phases: Vec<(String, f64, f64)>,
}
