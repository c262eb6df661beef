//! `framepipe doctor`: what matters for this pipeline on this machine — the GPU and its
//! copy engines, the PCIe link, measured copy bandwidth (page-locked and pageable, each way
//! and both at once), NVRTC, decoding (NVDEC, and what `--decode auto` picks), OpenCV, the
//! display and the cameras; and what this build's FFmpeg reads and writes (`ffmpeg`).

use anyhow::Result;
use cudarc::driver::{sys, CudaContext};

use crate::backend::{device, measure};
use crate::frame::FrameSize;

#[cfg(feature = "ffmpeg")]
mod ffmpeg;

/// Runs `framepipe doctor`: prints what this machine offers framepipe.
pub fn run() -> Result<()> {
    crate::out!("framepipe {} doctor", env!("CARGO_PKG_VERSION"));
    let cuda = device::probe();
    match &cuda {
        Ok(()) => gpu()?,
        Err(why) => crate::out!("GPU:        none ({why}); framepipe uses its CPU backend"),
    }
    let cores = crate::host::cores();
    crate::out!("CPU:        {cores} cores");
    #[cfg(feature = "ffmpeg")]
    crate::out!(
        "decoding:   {}",
        crate::source::nvdec::doctor(cores, cuda.is_ok())
    );
    #[cfg(feature = "ffmpeg")]
    ffmpeg::report();
    #[cfg(not(feature = "ffmpeg"))]
    crate::out!("decoding:   no FFmpeg libraries in this build (video files need them)");
    match crate::detect::runtime::describe() {
        Ok(what) => {
            let mut providers = crate::detect::runtime::accelerators();
            providers.push("CPU");
            crate::out!(
                "detection:  ONNX Runtime at {what}; execution providers: {}",
                providers.join(", ")
            )
        }
        Err(why) => crate::out!("detection:  none ({why}); --detect is refused, all else runs"),
    }
    host_side();
    Ok(())
}

fn gpu() -> Result<()> {
    let ctx = crate::backend::device::open_device(crate::backend::device::DEFAULT_DEVICE)?;
    let attr = |a| ctx.attribute(a).unwrap_or(-1);
    use sys::CUdevice_attribute as A;
    let (major, minor) = ctx.compute_capability()?;
    let mut driver = 0;
    // SAFETY: writes one int.
    unsafe { sys::cuDriverGetVersion(&mut driver) }.result()?;
    crate::out!(
        "GPU:        {} (compute capability {major}.{minor}, {} SMs, {:.1} GiB), {} device(s)",
        ctx.name()?,
        attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        ctx.total_mem()? as f64 / (1u64 << 30) as f64,
        CudaContext::device_count()?
    );
    crate::out!(
        "driver:     CUDA {}.{} interface",
        driver / 1000,
        (driver % 1000) / 10
    );
    crate::out!(
        "copy:       {} copy engine(s) (asyncEngineCount); can map host memory: {}",
        attr(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT),
        attr(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) == 1
    );
    let bus = format!(
        "{:04x}:{:02x}:{:02x}.0",
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
        attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
    );
    crate::out!("PCIe:       {}", pcie_link(&bus));
    let (mut maj, mut min) = (0, 0);
    // SAFETY: writes two ints.
    let nvrtc = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut maj, &mut min) };
    crate::out!("NVRTC:      {maj}.{min} ({nvrtc:?})");
    let size = FrameSize::new(1920, 1080);
    crate::out!(
        "bandwidth:  {size} BGR frames ({:.1} MB), 50 copies each:",
        size.bytes() as f64 / 1e6
    );
    crate::out!(
        "            {:<12} {:>10} {:>10} {:>16}",
        "",
        "H2D",
        "D2H",
        "both at once"
    );
    for (name, pageable) in [("page-locked", false), ("pageable", true)] {
        let b = measure::bandwidth(size, pageable, 50)?;
        crate::out!(
            "            {name:<12} {:>5.1} GB/s {:>5.1} GB/s {:>11.1} GB/s",
            b.h2d_gbs,
            b.d2h_gbs,
            b.both_gbs
        );
    }
    let z = measure::zero_copy(size, 50)?;
    crate::out!(
        "            {:<12} {:>5.1} GB/s {:>5.1} GB/s {:>11.1} GB/s   (kernels reading/writing mapped host memory)",
        "zero-copy", z.read_gbs, z.write_gbs, z.both_gbs
    );
    crate::out!(
        "            {:<12} {:>28.1} GB/s   (copy-engine upload + kernel writing host memory)",
        "mixed",
        z.upload_and_write_gbs
    );
    let (up, down) = measure::copy_overhead_us(size, 16, 30)?;
    crate::out!(
        "per copy:   {up:.1} µs (H2D), {down:.1} µs (D2H) beyond its bytes (a frame as 16 back-to-back copies against 1); a band pays it in each direction"
    );
    Ok(())
}

/// "Gen5 x16 (32.0 GT/s)" from sysfs, or why it is unknown.
fn pcie_link(bus: &str) -> String {
    let dir = format!("/sys/bus/pci/devices/{bus}");
    let read =
        |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).map(|s| s.trim().to_string());
    match (read("current_link_speed"), read("current_link_width")) {
        (Ok(speed), Ok(width)) => {
            let gts: f64 = speed
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            let generation = match gts as u32 {
                2 => "1",
                5 => "2",
                8 => "3",
                16 => "4",
                32 => "5",
                64 => "6",
                _ => "?",
            };
            let max = read("max_link_speed").unwrap_or_default();
            format!("Gen{generation} x{width} ({speed}; max {max}) at {bus}")
        }
        _ => format!("link speed not readable at {dir}"),
    }
}

#[cfg(feature = "opencv")]
fn host_side() {
    use opencv::prelude::*;
    use opencv::videoio;
    let version = opencv::core::get_version_string().unwrap_or_default();
    crate::out!("OpenCV:     {version} (this build has the window, capture and writers)");
    crate::out!("GStreamer:  {}", gstreamer_line());
    match crate::display::window::check_display() {
        Ok(()) => crate::out!(
            "display:    available ({})",
            std::env::var("DISPLAY").unwrap_or_default()
        ),
        Err(why) => crate::out!("display:    none: {why}"),
    }
    let mut devices: Vec<i32> = std::fs::read_dir("/dev")
        .map(|d| {
            d.filter_map(|e| {
                e.ok()?
                    .file_name()
                    .to_str()?
                    .strip_prefix("video")?
                    .parse()
                    .ok()
            })
            .collect()
        })
        .unwrap_or_default();
    devices.sort();
    if devices.is_empty() {
        crate::out!("cameras:    none (/dev/video* not found)");
    }
    for i in devices {
        let opened = videoio::VideoCapture::new(i, videoio::CAP_V4L2)
            .ok()
            .filter(|c| c.is_opened().unwrap_or(false));
        match opened {
            Some(mut cap) => {
                let mut m = opencv::core::Mat::default();
                let ok = cap.read(&mut m).unwrap_or(false) && !m.empty();
                let fps = cap.get(videoio::CAP_PROP_FPS).unwrap_or(0.0);
                if ok {
                    crate::out!(
                        "cameras:    {i} (/dev/video{i}) opens: {}x{} at {fps:.0} fps",
                        m.cols(),
                        m.rows()
                    );
                } else {
                    crate::out!("cameras:    {i} (/dev/video{i}) opens but gives no frame");
                }
            }
            None => crate::out!("cameras:    {i} (/dev/video{i}) does not open"),
        }
    }
}

/// Whether OpenCV's capture reads GStreamer pipelines (`--input '… ! appsink'`), as its
/// build information says.
#[cfg(feature = "opencv")]
fn gstreamer_line() -> &'static str {
    let info = opencv::core::get_build_information().unwrap_or_default();
    let yes = info
        .lines()
        .any(|l| l.trim_start().starts_with("GStreamer:") && l.contains("YES"));
    match yes {
        true => {
            "OpenCV reads GStreamer pipelines (--input 'videotestsrc ! videoconvert ! appsink')"
        }
        false => "OpenCV was built without GStreamer: --input pipelines with '!' can't be read",
    }
}

#[cfg(not(feature = "opencv"))]
fn host_side() {
    crate::out!(
        "{}",
        if cfg!(feature = "ffmpeg") {
            "OpenCV:     not in this build (no window or camera; video files through FFmpeg's libraries)"
        } else {
            "OpenCV:     not in this build (no window, camera or video files; test pattern and PPM output only)"
        }
    );
    crate::out!("display:    not used by this build");
    crate::out!("GStreamer:  not in this build (OpenCV reads GStreamer pipelines)");
    crate::out!("cameras:    not available in this build");
}
