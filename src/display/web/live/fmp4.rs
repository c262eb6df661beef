//! Fragmented MP4 of a feed's H.264 units, for Media Source Extensions (`mse`): an init
//! segment (`ftyp`, `moov` with the stream's `avcC`) and one fragment a unit (`moof` with
//! its decode time, duration, size, composition offset and keyframe flag; `mdat` with its
//! NAL units length-prefixed), as ISO/IEC 14496-12 and -15 lay them out.
//!
//! Invariants: the init segment is made from a keyframe's own parameter sets (SPS, PPS);
//! a fragment's decode times only grow; a sample holds every NAL unit of its unit but the
//! parameter sets and access unit delimiters (they are the init segment's).

use super::feed::{nal_units, Unit};

/// The track's time scale: the units' 90 kHz.
const SCALE: u32 = 90_000;

/// A box: its type and body, with its size before.
fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(body.len() + 8);
    b.extend_from_slice(&(body.len() as u32 + 8).to_be_bytes());
    b.extend_from_slice(kind);
    b.extend_from_slice(body);
    b
}

/// A full box: its version and flags, then `body`.
fn full(kind: &[u8; 4], version: u8, flags: u32, body: &[u8]) -> Vec<u8> {
    let mut b = vec![version];
    b.extend_from_slice(&flags.to_be_bytes()[1..]);
    b.extend_from_slice(body);
    boxed(kind, &b)
}

/// The unity matrix of `mvhd` and `tkhd`.
fn matrix() -> Vec<u8> {
    [0x10000u32, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect()
}

/// The stream's SPS and PPS, where `unit` (a keyframe) carries them.
pub fn parameter_sets(unit: &Unit) -> Option<(Vec<u8>, Vec<u8>)> {
    let of = |t: u8| nal_units(&unit.annexb).find(|n| n.first().is_some_and(|b| b & 0x1f == t));
    Some((of(7)?.to_vec(), of(8)?.to_vec()))
}

/// The codecs string MSE asks for (`avc1.PPCCLL`, from the SPS).
pub fn codecs(sps: &[u8]) -> String {
    match sps.get(1..4) {
        Some(p) => format!("avc1.{:02x}{:02x}{:02x}", p[0], p[1], p[2]),
        None => "avc1.42e01f".into(),
    }
}

/// The init segment of a `width`x`height` stream with these parameter sets.
pub fn init(sps: &[u8], pps: &[u8], (width, height): (u16, u16)) -> Vec<u8> {
    let mut ftyp = b"isom".to_vec();
    ftyp.extend_from_slice(&0x200u32.to_be_bytes());
    for brand in [b"isom", b"iso6", b"avc1", b"mp41"] {
        ftyp.extend_from_slice(brand);
    }
    let mut mvhd = vec![0u8; 8]; // creation, modification
    mvhd.extend_from_slice(&1000u32.to_be_bytes());
    mvhd.extend_from_slice(&[0; 4]); // duration
    mvhd.extend_from_slice(&0x0001_0000u32.to_be_bytes());
    mvhd.extend_from_slice(&0x0100u16.to_be_bytes());
    mvhd.extend_from_slice(&[0; 10]);
    mvhd.extend_from_slice(&matrix());
    mvhd.extend_from_slice(&[0; 24]);
    mvhd.extend_from_slice(&2u32.to_be_bytes());
    let mut tkhd = vec![0u8; 8];
    tkhd.extend_from_slice(&1u32.to_be_bytes()); // track 1
    tkhd.extend_from_slice(&[0; 4]);
    tkhd.extend_from_slice(&[0; 4]); // duration
    tkhd.extend_from_slice(&[0; 8]);
    tkhd.extend_from_slice(&[0; 8]); // layer, group, volume, reserved
    tkhd.extend_from_slice(&matrix());
    tkhd.extend_from_slice(&(u32::from(width) << 16).to_be_bytes());
    tkhd.extend_from_slice(&(u32::from(height) << 16).to_be_bytes());
    let mut mdhd = vec![0u8; 8];
    mdhd.extend_from_slice(&SCALE.to_be_bytes());
    mdhd.extend_from_slice(&[0; 4]);
    mdhd.extend_from_slice(&0x55c4u16.to_be_bytes()); // "und"
    mdhd.extend_from_slice(&[0; 2]);
    let mut hdlr = vec![0u8; 4];
    hdlr.extend_from_slice(b"vide");
    hdlr.extend_from_slice(&[0; 12]);
    hdlr.extend_from_slice(b"framepipe\0");
    let dref = full(
        b"dref",
        0,
        0,
        &[&1u32.to_be_bytes()[..], &full(b"url ", 0, 1, &[])].concat(),
    );
    let minf = boxed(
        b"minf",
        &[
            full(b"vmhd", 0, 1, &[0; 8]),
            boxed(b"dinf", &dref),
            stbl(sps, pps, (width, height)),
        ]
        .concat(),
    );
    let mdia = boxed(
        b"mdia",
        &[full(b"mdhd", 0, 0, &mdhd), full(b"hdlr", 0, 0, &hdlr), minf].concat(),
    );
    let trak = boxed(b"trak", &[full(b"tkhd", 0, 3, &tkhd), mdia].concat());
    let mut trex = 1u32.to_be_bytes().to_vec();
    trex.extend_from_slice(&1u32.to_be_bytes());
    trex.extend_from_slice(&[0; 12]);
    let mvex = boxed(b"mvex", &full(b"trex", 0, 0, &trex));
    let moov = boxed(b"moov", &[full(b"mvhd", 0, 0, &mvhd), trak, mvex].concat());
    [boxed(b"ftyp", &ftyp), moov].concat()
}

/// The sample table: the `avc1` description, no samples (they are in the fragments).
fn stbl(sps: &[u8], pps: &[u8], (width, height): (u16, u16)) -> Vec<u8> {
    let mut avcc = vec![1, sps[1], sps[2], sps[3], 0xff, 0xe1];
    avcc.extend_from_slice(&(sps.len() as u16).to_be_bytes());
    avcc.extend_from_slice(sps);
    avcc.push(1);
    avcc.extend_from_slice(&(pps.len() as u16).to_be_bytes());
    avcc.extend_from_slice(pps);
    if matches!(sps[1], 100 | 110 | 122 | 144) {
        avcc.extend_from_slice(&[0xfd, 0xf8, 0xf8, 0]); // 4:2:0, 8 bits
    }
    let mut avc1 = vec![0u8; 6];
    avc1.extend_from_slice(&1u16.to_be_bytes()); // data reference
    avc1.extend_from_slice(&[0; 16]);
    avc1.extend_from_slice(&width.to_be_bytes());
    avc1.extend_from_slice(&height.to_be_bytes());
    avc1.extend_from_slice(&0x0048_0000u32.to_be_bytes());
    avc1.extend_from_slice(&0x0048_0000u32.to_be_bytes());
    avc1.extend_from_slice(&[0; 4]);
    avc1.extend_from_slice(&1u16.to_be_bytes()); // frames a sample
    avc1.extend_from_slice(&[0; 32]); // compressor name
    avc1.extend_from_slice(&0x18u16.to_be_bytes());
    avc1.extend_from_slice(&0xffffu16.to_be_bytes());
    avc1.extend_from_slice(&boxed(b"avcC", &avcc));
    let stsd = full(
        b"stsd",
        0,
        0,
        &[&1u32.to_be_bytes()[..], &boxed(b"avc1", &avc1)].concat(),
    );
    let empty = |k: &[u8; 4]| full(k, 0, 0, &[0; 4]);
    boxed(
        b"stbl",
        &[
            stsd,
            empty(b"stts"),
            empty(b"stsc"),
            full(b"stsz", 0, 0, &[0; 8]),
            empty(b"stco"),
        ]
        .concat(),
    )
}

/// One unit as a fragment: number `sequence`, decoded at `decode` (90 kHz), lasting
/// `duration`.
pub fn fragment(unit: &Unit, sequence: u32, decode: u64, duration: u32) -> Vec<u8> {
    let mut sample = Vec::with_capacity(unit.annexb.len());
    for nal in nal_units(&unit.annexb) {
        let kind = nal.first().map_or(0, |b| b & 0x1f);
        if nal.is_empty() || matches!(kind, 7..=9) {
            continue;
        }
        sample.extend_from_slice(&(nal.len() as u32).to_be_bytes());
        sample.extend_from_slice(nal);
    }
    let flags: u32 = match unit.key {
        true => 0x0200_0000,
        false => 0x0101_0000,
    };
    let offset = (unit.pts90k - unit.dts90k) as i32;
    let trun_of = |data_offset: u32| {
        let mut t = 1u32.to_be_bytes().to_vec();
        t.extend_from_slice(&data_offset.to_be_bytes());
        t.extend_from_slice(&duration.to_be_bytes());
        t.extend_from_slice(&(sample.len() as u32).to_be_bytes());
        t.extend_from_slice(&flags.to_be_bytes());
        t.extend_from_slice(&offset.to_be_bytes());
        full(b"trun", 1, 0x000f01, &t)
    };
    let moof_of = |data_offset: u32| {
        let traf = boxed(
            b"traf",
            &[
                full(b"tfhd", 0, 0x02_0000, &1u32.to_be_bytes()),
                full(b"tfdt", 1, 0, &decode.to_be_bytes()),
                trun_of(data_offset),
            ]
            .concat(),
        );
        boxed(
            b"moof",
            &[full(b"mfhd", 0, 0, &sequence.to_be_bytes()), traf].concat(),
        )
    };
    let size = moof_of(0).len() as u32;
    [moof_of(size + 8), boxed(b"mdat", &sample)].concat()
}
