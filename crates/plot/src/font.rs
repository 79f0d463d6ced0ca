//! The embedded font: DejaVu Sans (Bitstream Vera licence, `assets/DejaVu-LICENSE`), so the
//! dashboard draws text on machines without any system font.

use plotters::style::{FontStyle, register_font};

use crate::PlotError;

static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the font as plotters' `sans-serif`, at every drawing: plotters keeps its fonts
/// in its own table, and registering again replaces the entry with the same font (the font
/// is borrowed from the binary and only its tables are read, far less than a drawing costs),
/// so this crate keeps no state of its own.
pub(crate) fn register() -> Result<(), PlotError> {
    let parsed = [FontStyle::Normal, FontStyle::Bold]
        .into_iter()
        .all(|style| register_font("sans-serif", style, DEJAVU_SANS).is_ok());
    if parsed { Ok(()) } else { Err(PlotError::Font) }
}
