//! What each finding is called, and what kind of thing it says.
//!
//! A finding's name is written into JSON (`"id"`), recordings' `finding` events, `/metrics`
//! labels and every printed view, so it is spelt once, in `finding_ids!` below; everything else
//! matches on [`FindingId`], and a new finding is a line there plus its rule, with the compiler
//! pointing at each `match` that must learn it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Basis;
use crate::account_kind::AccountKind;

/// Declares [`FindingId`] from one table, so nothing about a finding can drift from its row:
/// its doc, its stable name (a [`gpulse_base::words!`] set, with [`FindingId::ALL`]), what it is
/// about ([`Concern`]), how the headline names its cause ([`Headline`]) and, where it has any,
/// the ledger's accounts whose time it is ([`Explains`]). A new finding is a row, and its rule.
macro_rules! finding_ids {
    ($($(#[doc = $doc:literal])+ $variant:ident = $name:literal, $concern:ident, $headline:expr $(, $explains:expr)?;)+) => {
        gpulse_base::words! {
            /// Which finding: one per thing the rules can say. Serialized as its snake_case name,
            /// such as `input_bound`: what JSON, recordings and `/metrics` hold.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            pub enum FindingId {
                $($(#[doc = $doc])+ $variant => $name,)+
            }
        }

        impl FindingId {
            /// What it is about, which decides where it counts.
            pub const fn concern(self) -> Concern {
                match self {
                    $(FindingId::$variant => Concern::$concern,)+
                }
            }

            /// How the headline names its cause.
            pub const fn headline(self) -> Headline {
                use Headline::*;
                match self {
                    $(FindingId::$variant => $headline,)+
                }
            }

            /// The ledger's accounts whose time it is.
            pub const fn explains(self) -> Explains {
                match self {
                    $(FindingId::$variant => explains_or_nothing!($($explains)?),)+
                }
            }
        }
    };
}

/// A row's accounts, `Explains::NOTHING` where it names none.
macro_rules! explains_or_nothing {
    () => {
        Explains::NOTHING
    };
    ($e:expr) => {
        $e
    };
}

finding_ids! {
    /// The loop waits for data, measured or from the GPU's bursts.
    InputBound = "input_bound", Job, Words("Waiting for data (inferred from the GPU's idle bursts)"),
        Explains::measured(AccountKind::DataWait).or_idle(AccountKind::InputInferred, "waiting for data, by the GPU's pattern");
    /// One busy training process starves the GPU: data loading or Python overhead.
    ProcessBound = "process_bound", Job, Words("The training process starving the GPU (data loading or Python overhead)"),
        Explains::idle(AccountKind::HostSide, "the training process on the host (data loading or Python)");
    /// Launches or synchronizations keep the GPU low and steady.
    HostBound = "host_bound", Job, Words("The host not feeding the GPU (launch overhead or synchronizations)"),
        Explains::idle(AccountKind::HostSide, "host-side work in each step (launches, Python, synchronizations)");
    /// Copies to the GPU hold the loop up.
    TransferBound = "transfer_bound", Job, Words("Host-to-device copies"),
        Explains::measured(AccountKind::Transfer).or_idle(AccountKind::Transfer, "copies between the host and the GPU");
    /// The machine's CPU is saturated while the GPU waits.
    HostSaturated = "host_saturated", Job, Words("A saturated host CPU"),
        Explains::idle(AccountKind::HostSaturated, "the GPU idle while the host's CPU was saturated");
    /// GPU-Util reads high while the SMs do little.
    UtilMisleading = "util_misleading", Job, Title;
    /// GPUs of one job loaded unevenly.
    GpuImbalance = "gpu_imbalance", Job, Title;
    /// No bottleneck found.
    Healthy = "healthy", Healthy, Title;
    /// Dense FP32 arithmetic the tensor cores could run.
    TensorIdle = "tensor_idle", Job, Title;
    /// A GPU ran out of memory.
    Oom = "oom", Job, Title;
    /// A GPU's memory near full.
    MemoryPressure = "memory_pressure", Job, Title;
    /// A GPU's memory growing toward full.
    MemoryGrowth = "memory_growth", Job, Title;
    /// One of the loop's own phases holds much of the wall time.
    MarkedPhase = "marked_phase", OnPurpose, Title;
    /// Bulk storage writes with the GPU idle.
    CheckpointWrites = "checkpoint_writes", Job, Title;
    /// Wall time the ledger could not place.
    UnexplainedTime = "unexplained_time", Unexplained, Title;
    /// A long start before the first step.
    Startup = "startup", Job, Title;
    /// DataLoader workers started again at each epoch.
    EpochRestart = "epoch_restart", Job, Words("Restarting the DataLoader's workers at each epoch");
    /// The GPU idles at a regular period.
    PeriodicStall = "periodic_stall", Job, Words("Periodic stalls"),
        Explains::always(AccountKind::Stall);
    /// Thermal, hardware or power slowdown.
    Throttling = "throttling", Job, Title;
    /// A process outside any job's work holds GPU memory and does nothing.
    IdleHolder = "idle_holder", OtherProcesses, Title;
    /// A process outside the watched job holds GPU memory.
    ForeignProcess = "foreign_process", OtherProcesses, Title;
    /// A process outside the job computes on the job's GPU: its kernels share the SMs.
    GpuShared = "gpu_shared", Job, Title,
        Explains::always(AccountKind::GpuOthers);
    /// The job's DataLoader workers run more threads than the machine has cores.
    CpuOversubscribed = "cpu_oversubscribed", Job, Title;
    /// One process drives several GPUs (nn.DataParallel).
    DataParallel = "data_parallel", Job, Title;
    /// A rank's memory on another rank's GPU.
    DeviceMisbinding = "device_misbinding", Job, Title;
    /// DataLoader workers' memory growing (copy-on-access).
    WorkerMemory = "worker_memory", Job, Title;
    /// A GPU stopped answering.
    GpuLost = "gpu_lost", Job, Title;
    /// The kernel's OOM killer ended a process.
    HostOom = "host_oom", Job, Title;
    /// An NCCL collective timed out.
    NcclTimeout = "nccl_timeout", Job, Title;
    /// NCCL failed.
    NcclError = "nccl_error", Job, Title;
    /// A DataLoader worker was killed.
    DataloaderKilled = "dataloader_killed", Job, Title;
    /// The driver reported an Xid error.
    Xid = "xid", Job, Title;
    /// A row remap or a page retirement waits for the GPU to be reset.
    GpuResetPending = "gpu_reset_pending", Job, Title;
    /// A multi-GPU job's collectives cross PCIe while its GPUs' NVLinks idle.
    NvlinkUnused = "nvlink_unused", Job, Title;
    /// The main thread runs Python (or native code called from it) while the GPU waits.
    HostPython = "main_thread_python", Job, Mechanism;
    /// The main thread runs native code that released the GIL (a torch CPU op, numpy).
    NativeCode = "main_thread_native", Job, Mechanism;
    /// The main thread is ready to run but waits for a core (its clocks say so).
    CoreWait = "core_wait", Job, Mechanism;
    /// The main thread waits for the GIL another thread holds.
    GilContention = "gil_contention", Job, Mechanism;
    /// The main thread sleeps while the GPU waits.
    SleepInLoop = "sleep_in_loop", Job, Mechanism;
    /// The main thread waits on a socket.
    NetworkWait = "network_wait", Job, Mechanism;
    /// The main thread waits on file I/O.
    DiskWait = "disk_wait", Job, Mechanism;
    /// The main thread waits on another process: a pipe, a queue, a child.
    IpcWait = "ipc_wait", Job, Mechanism;
    /// The main thread waits on a lock of its own threads.
    LockWait = "lock_wait", Job, Mechanism;
    /// The main thread is blocked in the kernel for a reason no rule names.
    MainThreadBlocked = "main_thread_blocked", Job, Mechanism;
    /// The main thread waits for the other ranks in a collective, and no one rank holds them
    /// back (or the ranks are not known).
    PeerWait = "peer_wait", Job, Mechanism;
    /// One rank holds the others back: they wait for it in their collectives.
    Straggler = "rank_straggler", Job, Mechanism;
}

/// The ledger's accounts whose time a finding is: its own, the time it measured or a stall's
/// pauses (what it costs); and, found by a pattern, the account of the GPU's idle time it
/// explains, with the account's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Explains {
    /// Its own account, and whether only a measured finding holds it.
    own: Option<(AccountKind, bool)>,
    idle: Option<(AccountKind, &'static str)>,
}

impl Explains {
    /// No account: its cost, if any, is its rule's own estimate.
    pub const NOTHING: Explains = Explains { own: None, idle: None };

    /// Measured, the time in `account`.
    const fn measured(account: AccountKind) -> Explains {
        Explains { own: Some((account, true)), idle: None }
    }

    /// However it was found, the time in `account`.
    const fn always(account: AccountKind) -> Explains {
        Explains { own: Some((account, false)), idle: None }
    }

    /// Inferred, the GPU's idle time it explains, booked as `account` with these words.
    const fn idle(account: AccountKind, words: &'static str) -> Explains {
        Explains { own: None, idle: Some((account, words)) }
    }

    /// As [`Explains::idle`], besides what it measures.
    const fn or_idle(self, account: AccountKind, words: &'static str) -> Explains {
        Explains { idle: Some((account, words)), ..self }
    }
}

impl FindingId {
    /// The account that holds what this finding, on `basis`, costs: the time it measured, or a
    /// stall's pauses. `None` where its cost is not an account of its own.
    pub(crate) fn own_account(self, basis: Basis) -> Option<AccountKind> {
        self.explains().own.filter(|(_, measured_only)| !measured_only || basis == Basis::Measured).map(|o| o.0)
    }

    /// The account and its label for the GPU's idle time inside the loop that this finding, when
    /// inferred, explains; `None` for a finding that explains no idle time.
    pub(crate) fn idle_account(self) -> Option<(AccountKind, &'static str)> {
        self.explains().idle
    }
}

/// How the headline names a finding's cause, before what it cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    /// These words.
    Words(&'static str),
    /// Its evidence's `mechanism`: the mechanism and its site, without the title's figures.
    Mechanism,
    /// Its own title says it best.
    Title,
}

/// What a finding is about, which decides where it counts: what may lead the summary, what keeps
/// `healthy` away, what a comparison reports as come or gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concern {
    /// What slows the job or stops it: a cause to act on.
    Job,
    /// Time the loop spends on purpose in a phase it marked: worth leading with, no trouble.
    OnPurpose,
    /// Other processes' hold on a GPU's memory: worth knowing, not about how the job runs.
    OtherProcesses,
    /// Time the ledger could not place: a gap in what was recorded, not a cause.
    Unexplained,
    /// The clean bill of health, given only when nothing troubles the job.
    Healthy,
}

impl FindingId {
    /// Whether, at warning or worse, it says the job runs badly (and so no `healthy`).
    pub const fn is_trouble(self) -> bool {
        matches!(self.concern(), Concern::Job)
    }

    /// Whether the summary line may name it: what the job itself does with its time.
    pub const fn is_about_the_job(self) -> bool {
        matches!(self.concern(), Concern::Job | Concern::OnPurpose)
    }

    /// Whether it names something found in the run, not that nothing (else) was: what can come
    /// or go between two runs, and lead a live view.
    pub const fn names_something(self) -> bool {
        !matches!(self.concern(), Concern::Unexplained | Concern::Healthy)
    }
}

impl fmt::Display for FindingId {
    /// The name, padded as the format asks (`{:<16}` in `top`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A name no [`FindingId`] has: written by a newer gpulse, or not a finding at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFindingId(pub String);

impl fmt::Display for UnknownFindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown finding id {:?}", self.0)
    }
}

impl std::error::Error for UnknownFindingId {}

impl FromStr for FindingId {
    type Err = UnknownFindingId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownFindingId(s.to_owned()))
    }
}

impl Serialize for FindingId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// An unknown name is an error, not a panic and not a guess: the caller decides. Where a file
/// from another gpulse may name a finding this one lacks (a watched job's status), the name is
/// kept as the string it was written as and parsed only to act on it.
impl<'de> Deserialize<'de> for FindingId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_round_trips_through_its_name_and_the_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for id in FindingId::ALL {
            let name = id.as_str();
            assert!(seen.insert(name), "{name} twice");
            assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{name}");
            assert_eq!(name.parse::<FindingId>(), Ok(id));
            assert_eq!(id.to_string(), name);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<FindingId>(&json).unwrap(), id);
        }
        assert_eq!(format!("{:<16}|", FindingId::Oom), "oom             |", "padded as asked");
    }

    #[test]
    fn an_unknown_name_is_an_error_not_a_panic() {
        assert_eq!("gpu_on_fire".parse::<FindingId>(), Err(UnknownFindingId("gpu_on_fire".into())));
        assert!(serde_json::from_str::<FindingId>("\"gpu_on_fire\"").is_err());
        assert!(serde_json::from_str::<FindingId>("7").is_err());
    }

    /// The findings that are not the job's trouble, by what each is about.
    #[test]
    fn what_each_finding_is_about() {
        let not = |keep: fn(FindingId) -> bool| {
            FindingId::ALL.iter().copied().filter(|id| !keep(*id)).map(FindingId::as_str).collect::<Vec<_>>()
        };
        assert_eq!(
            not(FindingId::is_trouble),
            ["healthy", "marked_phase", "unexplained_time", "idle_holder", "foreign_process"]
        );
        assert_eq!(not(FindingId::is_about_the_job), ["healthy", "unexplained_time", "idle_holder", "foreign_process"]);
        assert_eq!(not(FindingId::names_something), ["healthy", "unexplained_time"]);
    }
}
