//! Drawing into pictures, below everything that shows or writes them: text and outlines on
//! a packed BGR canvas (`draw`: the mosaic's labels, in every build), and the detector's
//! boxes in frames of any pixel format or in a tile of a picture (`boxes`: `--draw`).
//!
//! Invariant: nothing here knows where a picture goes; every stroke is clipped to the
//! picture it is drawn in.

pub mod boxes;
pub mod draw;
