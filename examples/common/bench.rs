//! Statistics helpers shared by the benchmark examples (their options are clap's).

/// The median (upper median for an even count); `NaN` for no values.
#[allow(dead_code)] // not every example takes medians
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One configuration's measurements over the repeats of a benchmark.
#[allow(dead_code)] // not every example prints rows
pub struct Measured {
    /// Seconds per step, one per repeat.
    pub times: Vec<f64>,
    /// Peak heap bytes, one per repeat.
    pub peaks: Vec<f64>,
    /// Reads, values read and waits per tracked step, over every repeat (the read ledger).
    pub reads: Vec<burn_cockpit::persample::readback::ReadCount>,
    /// Kernels launched per step (CubeCL backends).
    pub kernels: Option<f64>,
    /// The reductions of each tracked step and the most values one unit of them walks
    /// (`persample::reduce::depth_of`; CubeCL backends).
    pub depths: Vec<burn_cockpit::persample::reduce::Depth>,
}

/// Prints `name`'s rows against the plain step's median time and peak: the overhead, the
/// peak memory, what a GPU would pay in reads, values read back and waits for the device,
/// and the kernels per step.
#[allow(dead_code)] // not every example prints rows
pub fn print_rows(name: &str, measured: Measured, plain_time: f64, plain_peak: f64) {
    let Measured {
        times,
        peaks,
        reads,
        kernels,
        depths,
    } = measured;
    let time = median(times);
    let peak = median(peaks);
    println!(
        "overhead {name} {:.3}   ({:.3} ms/step)",
        time / plain_time,
        time * 1e3
    );
    println!(
        "peak_memory {name} {:.3}   ({:.1} MB)",
        peak / plain_peak,
        peak / 1e6
    );
    println!(
        "reads_per_step {name} {}",
        median(reads.iter().map(|r| r.reads as f64).collect())
    );
    println!(
        "values_read_per_step {name} {}",
        median(reads.iter().map(|r| r.values as f64).collect())
    );
    // Times the host stopped for the device inside a tracked step (0 with a deferred read
    // whose copy has landed by the next call).
    println!(
        "waits_per_step {name} {}",
        median(reads.iter().map(|r| r.waits as f64).collect())
    );
    if let Some(kernels) = kernels {
        println!("kernels_per_step {name} {kernels:.1}");
        // Work that does not spread over a GPU: the most values one unit of a reduction the
        // tracked steps issued walks (the largest over the steps), and the reductions a step.
        println!(
            "serial_depth {name} {}   ({} reductions/step)",
            depths.iter().map(|d| d.deepest).max().unwrap_or(0),
            median(depths.iter().map(|d| d.reductions as f64).collect())
        );
    }
}
