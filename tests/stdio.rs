//! Standard input and output: YUV4MPEG2 in (`--input -`) and out (`--output -`), raw frames
//! in (`--input-format`), checked exactly against the reference conversion and chain; a
//! truncated stream, a bad header and odd sizes refused with a clear message; a reader that
//! goes away ends the run cleanly; and the ffmpeg pipeline of the README.

use crate::common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::run::{bin, require, stderr, wait_with_deadline, TempDir};
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pixel::{Formats, PixelFormat};
use framepipe::source::pattern;

/// A Y4M stream of `frames` pattern frames at `size`, I420, and the BGR each decodes to.
fn y4m_stream(size: FrameSize, frames: u64) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut out = format!(
        "YUV4MPEG2 W{} H{} F30000:1001 Ip A1:1 C420jpeg\n",
        size.width, size.height
    )
    .into_bytes();
    let mut decoded = Vec::new();
    for seq in 0..frames {
        let mut bgr = vec![0; size.bytes()];
        pattern::draw(size, seq, &mut bgr);
        let mut yuv = vec![0; PixelFormat::I420.bytes(size)];
        PixelFormat::I420.from_bgr(size, &bgr, &mut yuv);
        out.extend_from_slice(b"FRAME\n");
        out.extend_from_slice(&yuv);
        let mut back = vec![0; size.bytes()];
        PixelFormat::I420.to_bgr(size, &yuv, &mut back);
        decoded.push(back);
    }
    (out, decoded)
}

/// Runs framepipe with `args`, `input` on its standard input; (exit code, stdout, stderr).
fn pipe(args: &[&str], input: Vec<u8>) -> (Option<i32>, Vec<u8>, String) {
    let mut child = Command::new(bin())
        .args(args)
        .env_remove("DISPLAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let out = wait_with_deadline(child, Duration::from_secs(60), &format!("{args:?}"));
    let _ = feeder.join();
    (out.status.code(), reader.join().unwrap(), stderr(&out))
}

/// The frames of a Y4M stream, as I420 bytes, and its header line.
fn parse_y4m(data: &[u8]) -> (String, Vec<Vec<u8>>) {
    let end = data.iter().position(|b| *b == b'\n').expect("a header");
    let header = String::from_utf8(data[..end].to_vec()).unwrap();
    let field = |tag: char| -> usize {
        header
            .split(' ')
            .find_map(|t| t.strip_prefix(tag)?.parse().ok())
            .unwrap()
    };
    let size = FrameSize::new(field('W'), field('H'));
    let n = PixelFormat::I420.bytes(size);
    let mut frames = Vec::new();
    let mut at = end + 1;
    while at < data.len() {
        assert_eq!(&data[at..at + 6], b"FRAME\n");
        frames.push(data[at + 6..at + 6 + n].to_vec());
        at += 6 + n;
    }
    (header, frames)
}

#[test]
fn y4m_in_and_out_equal_the_reference() {
    let size = FrameSize::new(320, 240);
    let (stream, decoded) = y4m_stream(size, 5);
    let chain = "gray,blur:3,invert";
    let (code, out, err) = pipe(
        &[
            "--input",
            "-",
            "--headless",
            "--filter",
            chain,
            "--output",
            "-",
        ],
        stream,
    );
    assert_eq!(code, Some(0), "{err}");
    let (header, frames) = parse_y4m(&out);
    assert!(
        header.starts_with("YUV4MPEG2 W320 H240 F30000:1001"),
        "{header}"
    );
    assert_eq!(frames.len(), 5, "{err}");
    let chain: Chain = chain.parse().unwrap();
    for (i, (got, input)) in frames.iter().zip(&decoded).enumerate() {
        let mut bgr = vec![0; size.bytes()];
        chain.apply_reference(size, input, &mut bgr);
        let mut want = vec![0; PixelFormat::I420.bytes(size)];
        PixelFormat::I420.from_bgr(size, &bgr, &mut want);
        assert!(got == &want, "frame {i} differs from the reference");
    }
    assert!(err.contains("standard input (YUV4MPEG2, i420)"), "{err}");
}

#[test]
fn raw_frames_in_need_their_size_and_equal_the_reference() {
    let size = FrameSize::new(64, 48);
    for format in ["i420", "nv12", "yuyv", "bgr24", "gray"] {
        let pixel = match format {
            "i420" => PixelFormat::I420,
            "nv12" => PixelFormat::Nv12,
            "yuyv" => PixelFormat::Yuyv,
            "bgr24" => PixelFormat::Bgr24,
            _ => PixelFormat::Gray,
        };
        let frame: Vec<u8> = (0..pixel.bytes(size))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let input = [frame.clone(), frame.clone()].concat();
        let (code, out, err) = pipe(
            &[
                "--input",
                "-",
                "--input-format",
                format,
                "--size",
                "64x48",
                "--headless",
                "--output",
                "-",
            ],
            input,
        );
        assert_eq!(code, Some(0), "{format}: {err}");
        let (_, frames) = parse_y4m(&out);
        assert_eq!(frames.len(), 2, "{format}");
        // `copy` between one format passes the planes untouched; else converted.
        let formats = Formats {
            input: pixel,
            output: PixelFormat::I420,
        };
        let mut want = vec![0; PixelFormat::I420.bytes(size)];
        let copy: Chain = "copy".parse().unwrap();
        framepipe::pixel::apply_reference(&copy, size, formats, &frame, &mut want);
        assert!(frames[0] == want, "{format}");
        if pixel == PixelFormat::I420 {
            assert!(
                frames[0] == frame,
                "i420 through copy comes out as it went in"
            );
        }
        let (code, _, err) = pipe(
            &["--input", "-", "--input-format", format, "--headless"],
            Vec::new(),
        );
        assert_eq!(code, Some(1), "{format}");
        assert!(err.contains("needs --size"), "{format}: {err}");
    }
}

#[test]
fn bad_streams_are_named() {
    let size = FrameSize::new(64, 48);
    let (stream, _) = y4m_stream(size, 4);
    // Cut inside frame 3: frames 0-2 come out, then the error.
    let cut = stream.len() - 1000;
    let (code, out, err) = pipe(
        &["--input", "-", "--headless", "--output", "-"],
        stream[..cut].to_vec(),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("ended inside frame 3"), "{err}");
    assert_eq!(parse_y4m(&out).1.len(), 3, "{err}");
    for (input, says) in [
        (b"P6\n64 48\n255\n".to_vec(), "not a YUV4MPEG2 stream"),
        (
            b"YUV4MPEG2 W65 H48 C420jpeg\n".to_vec(),
            "need an even width and height",
        ),
        (
            b"YUV4MPEG2 W64 H48 C420p10\n".to_vec(),
            "'420p10' is not supported",
        ),
        (Vec::new(), "standard input is empty"),
        (
            b"YUV4MPEG2 W64 H48\nFRAMX\n".to_vec(),
            "does not start with 'FRAME'",
        ),
    ] {
        let (code, _, err) = pipe(&["--input", "-", "--headless"], input);
        assert_eq!(code, Some(1), "{says}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{says}: {err}"
        );
    }
    // Odd sizes can't go out as 4:2:0 either.
    let (code, _, err) = pipe(
        &[
            "--input",
            "pattern",
            "--size",
            "33x17",
            "--frames",
            "2",
            "--headless",
            "--output",
            "-",
        ],
        Vec::new(),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("need an even width and height"), "{err}");
}

#[test]
fn a_reader_that_goes_away_ends_the_run_cleanly() {
    let mut child = Command::new(bin())
        .args([
            "--input",
            "pattern",
            "--size",
            "320x240",
            "--fps",
            "0",
            "--headless",
            "--output",
            "-",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut some = vec![0u8; 300_000];
    stdout.read_exact(&mut some).unwrap();
    drop(stdout); // like `| head -c 300000`
    let out = wait_with_deadline(child, Duration::from_secs(10), "closed stdout");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("standard output was closed"), "{err}");
    assert!(some.starts_with(b"YUV4MPEG2 W320 H240"));
}

#[test]
fn ffmpeg_pipes_through_framepipe() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = common::run::TempDir::new("stdio-ffmpeg");
    let out = dir.join("out.mp4");
    let script = format!(
        "ffmpeg -v error -f lavfi -i testsrc2=s=320x240:r=25:d=2 -f yuv4mpegpipe - | {} --input - --headless --filter gauss:2 --output - | ffmpeg -v error -y -f yuv4mpegpipe -i - {}",
        bin(),
        out.display()
    );
    let run = Command::new("bash")
        .args(["-o", "pipefail", "-c", &script])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    let probe = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-show_entries",
            "stream=nb_read_frames,r_frame_rate",
            "-of",
            "csv=p=0",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&probe.stdout).trim().to_string();
    assert_eq!(text, "25/1,50", "{}", stderr(&run));
}

/// What a Y4M header says of its pictures beyond size and rate (pixel aspect ratio,
/// interlacing; chroma siting and range where the samples pass untouched) is reported and
/// kept in the Y4M output; frames are filtered as stored.
#[test]
fn aspect_and_interlacing_are_kept() {
    let size = FrameSize::new(64, 48);
    let (stream, _) = y4m_stream(size, 2);
    let header_end = stream.iter().position(|b| *b == b'\n').unwrap();
    let anamorphic = [
        b"YUV4MPEG2 W64 H48 F25:1 It A10:11 C420mpeg2".to_vec(),
        stream[header_end..].to_vec(),
    ]
    .concat();
    let (code, out, err) = pipe(
        &[
            "--input",
            "-",
            "--headless",
            "--filter",
            "invert",
            "--output",
            "-",
        ],
        anamorphic,
    );
    assert_eq!(code, Some(0), "{err}");
    let (header, frames) = parse_y4m(&out);
    assert!(header.contains(" It A10:11 "), "{header}");
    assert!(header.contains("F25:1"), "{header}");
    assert_eq!(frames.len(), 2);
    assert!(err.contains("pixels 10:11 wide"), "{err}");
    assert!(err.contains("top field first"), "{err}");
    // Filtered (through BGR): the chroma is written as centred.
    assert!(header.contains("C420jpeg"), "{header}");
    // Passed untouched: the chroma siting and the range stay as the input said them.
    let full = [
        b"YUV4MPEG2 W64 H48 F25:1 Ip A1:1 C420mpeg2 XCOLORRANGE=FULL".to_vec(),
        stream[header_end..].to_vec(),
    ]
    .concat();
    let (code, out, err) = pipe(
        &["--input", "-", "--headless", "--output", "-"],
        full.clone(),
    );
    assert_eq!(code, Some(0), "{err}");
    let (header, frames) = parse_y4m(&out);
    assert!(
        header.ends_with("C420mpeg2 XYSCSS=420MPEG2 XCOLORRANGE=FULL"),
        "{header}"
    );
    assert_eq!(frames.len(), 2);
    assert!(out[header.len() + 1..] == full[full.iter().position(|b| *b == b'\n').unwrap() + 1..]);
    // Nothing said: square and progressive.
    let (_, out, _) = pipe(&["--input", "-", "--headless", "--output", "-"], stream);
    assert!(parse_y4m(&out).0.contains(" Ip A1:1 "));
}

/// `-v` says where each thread's time went (user and system CPU, waits, time waiting for a
/// CPU): the figures that explain a pipe hop (BENCHMARKS.md), for the capture, backend and
/// sink threads.
#[test]
fn verbose_runs_say_what_each_thread_spent() {
    let size = FrameSize::new(320, 240);
    let (stream, _) = y4m_stream(size, 30);
    let (code, out, err) = pipe(
        &["--input", "-", "--headless", "-v", "--output", "-"],
        stream,
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(parse_y4m(&out).1.len(), 30);
    for thread in ["capture 0", "backend", "sink"] {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("CPU of the {thread} thread over the run: ")))
            .unwrap_or_else(|| panic!("no CPU line for the {thread} thread:\n{err}"));
        // "user 0.01 s, system 0.00 s, 12 waits, 0 preempted, 0.001 s waiting for a CPU":
        // figures, not placeholders.
        let figures: Vec<f64> = line
            .rsplit(": ")
            .next()
            .unwrap()
            .split(", ")
            .filter_map(|part| part.split(' ').find_map(|t| t.parse().ok()))
            .collect();
        assert_eq!(figures.len(), 5, "{line}");
        assert!(figures.iter().all(|f| *f >= 0.0), "{line}");
    }
    // The ring is made without touching its pages: they come as frames fill them.
    assert!(err.contains("ring slots allocated in"), "{err}");
}

/// Standard output is closed as soon as the last frame is written, before framepipe
/// reports and releases the GPU, so that its reader (an encoder writing its last frames)
/// finishes meanwhile. Proven by holding framepipe up afterwards: its standard error is a
/// pipe filled to the brim before it starts, so its first message there (the summary, with
/// -q) blocks until the test reads it, which the test does only once standard output ended.
#[test]
fn standard_output_ends_before_framepipe_does() {
    use std::os::fd::AsRawFd;
    let size = FrameSize::new(64, 48);
    let (stream, _) = y4m_stream(size, 20);
    let (mut err_rx, err_tx) = std::io::pipe().unwrap();
    // Fill the pipe without blocking, then make it blocking again for framepipe.
    let fd = err_tx.as_raw_fd();
    // SAFETY: fcntl on a descriptor this test owns only reads and sets its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) };
    let mut filler = &err_tx;
    let chunk = [b'.'; 4096];
    let mut filled = 0;
    while let Ok(n) = filler.write(&chunk) {
        filled += n;
    }
    // SAFETY: as above.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    let mut child = Command::new(bin())
        .args([
            "-q",
            "--backend",
            "cpu",
            "--input",
            "-",
            "--headless",
            "--output",
            "-",
        ])
        .env_remove("DISPLAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(err_tx.try_clone().unwrap())
        .spawn()
        .unwrap();
    drop(err_tx);
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&stream);
    });
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    let ended = rx.recv_timeout(Duration::from_secs(30));
    // Let framepipe go on either way: its standard error is read from here on.
    let drain = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err_rx.read_to_end(&mut v);
        v
    });
    let out = wait_with_deadline(child, Duration::from_secs(30), "framepipe --output -");
    let _ = feeder.join();
    let err = String::from_utf8_lossy(&drain.join().unwrap()[filled..]).into_owned();
    let written =
        ended.expect("standard output did not end while framepipe was held after the run");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(parse_y4m(&written).1.len(), 20);
    assert!(err.contains("frames: 20 captured"), "{err}");
}

/// Files on standard input and output are read and written straight (one copy), pipes
/// through the staging buffer (`pipe.rs`): both give the same bytes, frames larger than the
/// staging buffer included (640x480 I420 is 450 KiB, three and a half buffers).
#[test]
fn files_and_pipes_on_the_ends_give_the_same_stream() {
    let size = FrameSize::new(640, 480);
    let (stream, _) = y4m_stream(size, 6);
    let args = [
        "-q",
        "--backend",
        "cpu",
        "--input",
        "-",
        "--headless",
        "--filter",
        "invert",
        "--output",
        "-",
    ];
    let (code, piped, err) = pipe(&args, stream.clone());
    assert_eq!(code, Some(0), "{err}");
    let dir = TempDir::new("stdio-files");
    std::fs::write(dir.join("in.y4m"), &stream).unwrap();
    let child = Command::new(bin())
        .args(args)
        .env_remove("DISPLAY")
        .stdin(std::fs::File::open(dir.join("in.y4m")).unwrap())
        .stdout(std::fs::File::create(dir.join("out.y4m")).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(60), "framepipe < file > file");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let filed = std::fs::read(dir.join("out.y4m")).unwrap();
    assert_eq!(parse_y4m(&filed).1.len(), 6);
    assert!(filed == piped, "a file and a pipe gave different streams");
}
