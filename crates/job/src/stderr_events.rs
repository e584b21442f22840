//! What a training job prints on stderr that is worth an event: CUDA out of memory, NCCL errors
//! and watchdog timeouts, a DataLoader worker killed, Xid messages.

use gpulse_model::EventKind;
use gpulse_model::run::{EVENT_TEXT_MAX_CHARS as MAX_TEXT, OLD_EVENT_TEXT_MAX_CHARS as OLD_MAX_TEXT, cut_text};
use serde_json::{Value, json};

/// The event a line of stderr stands for, if any: its kind and payload (`text`, plus what the
/// line names: bytes asked for, the GPU, a PID, an Xid code).
pub fn detect(line: &str) -> Option<(EventKind, Value)> {
    let kind = if line.contains("CUDA out of memory") || line.contains("OutOfMemoryError") {
        EventKind::CudaOom
    } else if line.contains("Watchdog caught collective operation timeout")
        || (line.contains("NCCL") && line.contains("timed out"))
        || line.contains("NCCL watchdog")
    {
        EventKind::NcclTimeout
    } else if line.contains("NCCL error")
        || line.contains("NCCL WARN")
        || line.contains("ncclInternalError")
        || line.contains("ncclSystemError")
        || line.contains("ncclUnhandledCudaError")
        || line.contains("ncclRemoteError")
        || line.contains("ncclInvalidUsage")
    {
        EventKind::NcclError
    } else if line.contains("DataLoader worker") && (line.contains("is killed") || line.contains("exited unexpectedly"))
    {
        EventKind::DataloaderKilled
    } else if line.contains("NVRM: Xid") || line.contains("Xid (PCI:") {
        EventKind::Xid
    } else {
        return None;
    };
    // A long line is cut between words (never inside a URL), and says so.
    let (text, cut) = cut_text(line, MAX_TEXT);
    let mut payload = json!({ "text": text });
    let obj = payload.as_object_mut()?;
    if cut {
        obj.insert("cut".into(), json!(true));
    } else if text.chars().count() == OLD_MAX_TEXT {
        // Whole, though as long as the texts the first recordings cut: readers are told.
        obj.insert("cut".into(), json!(false));
    }
    match kind {
        EventKind::CudaOom => {
            if let Some(b) = after(line, "Tried to allocate ").and_then(parse_size) {
                obj.insert("tried_bytes".into(), json!(b));
            }
            if let Some(g) = after(line, "GPU ").and_then(leading_u64) {
                obj.insert("gpu".into(), json!(g));
            }
        }
        EventKind::DataloaderKilled => {
            if let Some(p) = after(line, "(pid ").or_else(|| after(line, "pid(s) ")).and_then(leading_u64) {
                obj.insert("pid".into(), json!(p));
            }
            if let Some(sig) = after(line, "killed by signal: ") {
                obj.insert("signal".into(), json!(sig.trim().trim_end_matches('.')));
            }
        }
        EventKind::Xid => {
            // "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus."
            if let Some(code) = after(line, "): ").and_then(leading_u64) {
                obj.insert("xid".into(), json!(code));
            }
            if let Some(bus) = after(line, "(PCI:").and_then(|s| s.split(')').next()) {
                obj.insert("pci_bus_id".into(), json!(bus));
            }
        }
        _ => {}
    }
    Some((kind, payload))
}

fn after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    s.find(marker).map(|i| &s[i + marker.len()..])
}

fn leading_u64(s: &str) -> Option<u64> {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// "2.00 GiB" → bytes.
fn parse_size(s: &str) -> Option<u64> {
    let mut it = s.split_whitespace();
    let n: f64 = it.next()?.parse().ok()?;
    let unit = it.next()?.trim_end_matches(['.', ',', ')']);
    let mult = match unit {
        "B" | "bytes" => 1u64,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => gpulse_model::GIB,
        "TiB" => 1 << 40,
        _ => return None,
    };
    Some((n * mult as f64) as u64)
}

/// Splits a byte stream into lines (`\n` or `\r`, as progress bars redraw) for [`detect`],
/// however the writes are cut. A line longer than 64 KiB is judged in pieces.
#[derive(Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    const MAX_LINE: usize = 64 * 1024;

    /// Feeds bytes and calls `on_line` for each complete line.
    pub fn feed(&mut self, bytes: &[u8], on_line: &mut dyn FnMut(&str)) {
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                self.flush(on_line);
            } else {
                self.partial.push(b);
                if self.partial.len() >= Self::MAX_LINE {
                    self.flush(on_line);
                }
            }
        }
    }

    /// Judges what is left (the stream ended without a newline).
    pub fn flush(&mut self, on_line: &mut dyn FnMut(&str)) {
        if !self.partial.is_empty() {
            on_line(&String::from_utf8_lossy(&self.partial));
            self.partial.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_oom_message_is_kept_and_a_cut_one_says_so() {
        let oom = format!(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 256.00 MiB. {} See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)",
            "x ".repeat(250)
        );
        let (_, p) = detect(&oom).unwrap();
        assert_eq!((p["text"].as_str().unwrap(), p.get("cut")), (oom.as_str(), None));
        // Past the limit: cut before the URL the limit falls in, and marked.
        let url = oom.find("(https://").unwrap();
        let long = format!("{}{oom}", "x ".repeat((MAX_TEXT - url - 10) / 2));
        assert!(long.find("(https://").unwrap() < MAX_TEXT && long.len() > MAX_TEXT, "the limit falls in the URL");
        let (_, p) = detect(&long).unwrap();
        let text = p["text"].as_str().unwrap();
        assert_eq!(p["cut"], json!(true), "{text}");
        assert!(text.ends_with("Memory Management") && long.starts_with(text), "{}", &text[text.len() - 40..]);
        let (_, p) = detect(&format!("CUDA out of memory {}", "z".repeat(OLD_MAX_TEXT - 19))).unwrap();
        assert_eq!(p["cut"], json!(false), "as long as an old cut text, but whole");
    }

    #[test]
    fn recognises_the_real_texts() {
        let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.21 GiB is free.";
        let (k, p) = detect(oom).unwrap();
        assert_eq!(k.as_str(), "cuda_oom");
        assert_eq!(p["tried_bytes"], 2u64 << 30);
        assert_eq!(p["gpu"], 0);
        assert_eq!(
            detect("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB").unwrap().0.as_str(),
            "cuda_oom"
        );
        let wd = "[rank1]:[E1130 08:00:00.000000 123 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.";
        assert_eq!(detect(wd).unwrap().0.as_str(), "nccl_timeout");
        let ne = "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5";
        assert_eq!(detect(ne).unwrap().0.as_str(), "nccl_error");
        let dl = "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed. ";
        let (k, p) = detect(dl).unwrap();
        assert_eq!((k.as_str(), &p["pid"], &p["signal"]), ("dataloader_killed", &json!(4242), &json!("Killed")));
        let xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.";
        let (k, p) = detect(xid).unwrap();
        assert_eq!((k.as_str(), &p["xid"], &p["pci_bus_id"]), ("xid", &json!(79), &json!("0000:3b:00")));
        assert_eq!(detect("epoch 3: loss 0.512, 120 it/s"), None);
        assert_eq!(detect("Traceback (most recent call last):"), None);
    }

    #[test]
    fn lines_survive_any_cut_and_carriage_returns() {
        let text = b"100%|####| 10/10\rloss 1\nRuntimeError: CUDA out of memory. Tried\n tail";
        for cut in 0..text.len() {
            let mut s = LineSplitter::default();
            let mut lines = Vec::new();
            s.feed(&text[..cut], &mut |l| lines.push(l.to_owned()));
            s.feed(&text[cut..], &mut |l| lines.push(l.to_owned()));
            s.flush(&mut |l| lines.push(l.to_owned()));
            assert_eq!(lines, ["100%|####| 10/10", "loss 1", "RuntimeError: CUDA out of memory. Tried", " tail"]);
        }
    }
}
