//! An event's snapshot (`--clip`'s companion, as Frigate keeps one beside each clip): the
//! event's frame as a JPEG with its boxes and labels drawn, written beside the clip.
//!
//! Invariants: the picture is the event's own frame at its own size; the file is written
//! under a hidden `.part` name and renamed to its own (never replacing a file), so a reader
//! never sees half a JPEG.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::events::Picture;
use crate::output::picture::{ImageFormat, PictureEncoder};
use crate::pixel::{PixelFormat, Planes};

/// Writes `picture` with its boxes as the JPEG `name`; the name it got.
pub fn write(name: &Path, picture: Picture) -> Result<PathBuf> {
    let jpeg = jpeg(&picture)?;
    let part = super::claim_part(name)?;
    let written = std::fs::write(&part, jpeg)
        .with_context(|| format!("writing '{}'", part.display()))
        .and_then(|()| super::rename_without_replacing(&part, name));
    if written.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    written
}

/// `picture` with its boxes and labels drawn, as a JPEG.
pub fn jpeg(picture: &Picture) -> Result<Vec<u8>> {
    let Picture {
        format,
        size,
        bytes,
        boxes,
    } = picture;
    let (size, mut bgr) = (*size, vec![0u8; size.bytes()]);
    match format {
        PixelFormat::Bgr24 => bgr.copy_from_slice(&bytes[..size.bytes()]),
        f => crate::pixel::to_bgr(*f, size, bytes, &mut bgr),
    }
    let packed = Planes::packed(PixelFormat::Bgr24, size);
    if let Some(mut paint) =
        crate::paint::boxes::Paint::new(&mut bgr, PixelFormat::Bgr24, size, packed)
    {
        let all = paint.all();
        let labels = crate::detect::Draw::Labels;
        crate::paint::boxes::draw_boxes(&mut paint, all, size, boxes, labels);
    }
    PictureEncoder::new(ImageFormat::Jpeg, size)?.encode(&bgr)
}
