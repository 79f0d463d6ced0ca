//! Cockpit's `mean_gsnr_gauge`: the mean gradient signal-to-noise ratio.

super::base::scatter_gauge!("Mean GSNR", mean_gsnr, "mean GSNR", false);
