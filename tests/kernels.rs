//! User kernels without a GPU: the `kernel:` filter's parsing and parameters, the refusal on
//! the CPU backend (before any frame is read), `check-kernel` without CUDA, and live reload's
//! plumbing (a saved file becomes a reload; a failed one keeps the last chain and says why).
//! What needs the GPU (bit-exactness, the band check, swapping at a frame boundary, faults)
//! is in tests/gpu.rs.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::unbounded;
use framepipe::backend::{device, Control};
use framepipe::filter::{Chain, Filter};
use framepipe::reload::Reloader;

use common::run::{framepipe, stderr, TempDir};

fn fails_with(args: &[&str], says: &str) {
    let out = framepipe(args, Duration::from_secs(30));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(err.contains(says), "{args:?}: expected {says:?} in:\n{err}");
}

#[test]
fn kernel_filters_parse_with_their_parameters() {
    let c: Chain = "gray,kernel:examples/edges.cu,radius=1,strength=0.5,keep=0.25,gauss:1"
        .parse()
        .unwrap();
    assert_eq!(c.filters().len(), 3);
    assert_eq!(c.radius(), 1 + 3);
    let Filter::Kernel(k) = &c.filters()[1] else {
        panic!("{c}")
    };
    assert_eq!(k.function, "edges");
    assert_eq!(k.args.len(), 2);
    assert_eq!(
        c.to_string(),
        "gray,kernel:examples/edges.cu,radius=1,strength=0.5,keep=0.25,gauss:7,1"
    );
    // What a chain prints parses back to the same chain.
    assert_eq!(c.to_string().parse::<Chain>().unwrap(), c);
    // kernel:FILE:NAME picks a function too.
    let c: Chain = "kernel:examples/invert.cu:invert".parse().unwrap();
    assert_eq!(c.user_kernels().next().unwrap().function, "invert");
}

#[test]
fn kernel_mistakes_are_named_before_anything_runs() {
    let dir = TempDir::new("kernels");
    let two = dir.join("two.cu");
    std::fs::write(
        &two,
        "#include \"framepipe.cuh\"\nFP_KERNEL a(fp_band b) {}\nFP_KERNEL b(fp_band b, int n) {}\n",
    )
    .unwrap();
    let two = two.display().to_string();
    let pat = [
        "--input",
        "pattern",
        "--headless",
        "--frames",
        "2",
        "--filter",
    ];
    let run = |filter: String, says: &str| {
        let mut args: Vec<&str> = pat.to_vec();
        args.push(&filter);
        fails_with(&args, says);
    };
    run("kernel:nope.cu".into(), "kernel file 'nope.cu'");
    run("kernel:".into(), "missing argument");
    run(
        format!("kernel:{two}"),
        "several __global__ functions (a, b)",
    );
    run(format!("kernel:{two},fn=c"), "no __global__ function 'c'");
    run(format!("kernel:{two},fn=b"), "needs n=<int>");
    run(format!("kernel:{two},fn=b,n=x"), "n=x is not a valid int");
    run(format!("kernel:{two},fn=a,n=1"), "has no parameter 'n'");
    run("kernel:examples/box3.cu,radius=x".into(), "radius 'x'");
    run("invert,radius=1".into(), "does not follow a kernel:FILE");
}

#[test]
fn a_kernel_on_the_cpu_backend_is_refused_before_any_frame() {
    // The input does not even exist: the refusal comes before it is opened.
    fails_with(
        &[
            "--backend",
            "cpu",
            "--input",
            "/nonexistent/clip.mp4",
            "--headless",
            "--filter",
            "kernel:examples/invert.cu",
        ],
        "is a CUDA kernel and needs the CUDA backend",
    );
    if let Err(why) = device::probe() {
        fails_with(
            &[
                "--input",
                "pattern",
                "--headless",
                "--frames",
                "2",
                "--filter",
                "kernel:examples/invert.cu",
            ],
            "no CUDA here",
        );
        fails_with(
            &["check-kernel", "examples/box3.cu", "--radius", "1"],
            "check-kernel runs the kernel on the GPU: no CUDA here",
        );
        println!("no CUDA here ({why}): the refusal of the auto backend was checked");
    } else {
        println!("SKIPPED the no-CUDA refusals: this machine has CUDA");
    }
}

/// The reloader with a CPU-only `prepare`: a saved file sends the new chain; a failing
/// prepare keeps the old one, shows its message and logs it; `r` reloads unchanged files.
#[test]
fn saving_a_kernel_file_reloads_it_and_a_failure_keeps_the_last_one() {
    let dir = TempDir::new("reload");
    let file = dir.join("k.cu");
    std::fs::copy("examples/invert.cu", &file).unwrap();
    let chain: Chain = format!("gray,kernel:{}", file.display()).parse().unwrap();
    let reloader = Arc::new(Reloader::new(
        chain.clone(),
        Box::new(|c: &Chain| {
            let k = c.user_kernels().next().unwrap();
            match k.source.contains("syntax error") {
                true => Err(anyhow::anyhow!("{}(3): error: expected a \";\"", k.file())),
                false => Ok(()),
            }
        }),
        true,
    ));
    let (tx, rx) = unbounded::<Control>();
    let running = reloader.start(tx).unwrap();
    std::thread::sleep(Duration::from_millis(200));

    let v2 = std::fs::read_to_string(&file)
        .unwrap()
        .replace("255 - v.g", "v.g");
    std::fs::write(&file, &v2).unwrap();
    let Control::Chain(next) = rx.recv_timeout(Duration::from_secs(5)).expect("a reload") else {
        panic!("not a chain")
    };
    assert_eq!(&*next.user_kernels().next().unwrap().source, v2);
    assert_eq!(next.filters()[0], Filter::Gray);

    std::fs::write(&file, v2.replace("FP_PIXEL", "syntax error FP_PIXEL")).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    assert!(rx.try_recv().is_err(), "a failed reload sent a chain");
    let note = reloader.note().join("\n");
    assert!(note.contains("k.cu(3): error"), "{note}");

    std::fs::write(&file, &v2).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    running.request(framepipe::reload::Why::Key);
    let again = rx.recv_timeout(Duration::from_secs(5)).expect("r reloads");
    assert_eq!(again, Control::Chain(next));
    assert!(reloader.note().is_empty());
    drop(running);
    let log = reloader.log();
    let failed: Vec<_> = log.iter().filter(|r| r.error.is_some()).collect();
    assert_eq!(failed.len(), 1, "{log:?}");
    assert!(log.iter().any(|r| r.cause == "r pressed"), "{log:?}");
}
