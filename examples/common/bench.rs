//! Statistics helpers shared by the benchmark examples (their options are clap's).

/// The median (upper median for an even count); `NaN` for no values.
#[allow(dead_code)] // not every example takes medians
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
