//! Conversions between the model's units and the recording's integer columns.

/// Bytes to KiB, rounded up so that MiB rounded up stays exact.
pub fn kib(bytes: u64) -> i64 {
    bytes.div_ceil(1024) as i64
}

pub fn bytes(kib: i64) -> u64 {
    (kib as u64).saturating_mul(1024)
}

/// A percentage to per-mille, rounded.
pub fn pm(pct: f64) -> i64 {
    (pct * 10.0).round() as i64
}

pub fn pct(pm: i64) -> f64 {
    pm as f64 / 10.0
}

/// Milliseconds since the epoch to microseconds; a damaged file's absurd time saturates rather
/// than overflows.
pub fn us(ms: i64) -> i64 {
    ms.saturating_mul(1000)
}

/// Microseconds since the epoch to milliseconds.
pub fn ms(us: i64) -> i64 {
    us.div_euclid(1000)
}

/// The stored integer of `call`'s value in `g`.
#[inline(always)]
pub(crate) fn stored(call: &gpulse_model::Call, g: &gpulse_model::GpuSample) -> Option<i64> {
    let scale = match call.column {
        Some(c) => c.scale,
        None => gpulse_model::Scale::One,
    };
    (call.read)(g).map(|x| scale.store(x))
}
