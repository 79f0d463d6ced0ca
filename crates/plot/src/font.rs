//! The embedded font: DejaVu Sans (Bitstream Vera licence, `assets/DejaVu-LICENSE`), so the
//! dashboard draws text on machines without any system font.

use std::sync::OnceLock;

use plotters::style::{FontStyle, register_font};

use crate::PlotError;

static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the font as plotters' `sans-serif` (once per process).
pub(crate) fn register() -> Result<(), PlotError> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            register_font("sans-serif", style, DEJAVU_SANS)
                .map_err(|_| "the embedded DejaVu Sans font does not parse".to_string())?;
        }
        Ok(())
    })
    .clone()
    .map_err(PlotError::Draw)
}
