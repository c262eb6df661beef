//! Property tests: random command lines and random filter chains never make framepipe
//! panic; the parsers answer Ok or a message, and the binary exits 0 or 1 (never 101 or a
//! signal) in bounded time. Bounded case counts keep this a CI test.

use crate::common;

use std::time::Duration;

use clap::Parser;
use proptest::prelude::*;

use common::run::{framepipe_in, TempDir};
use framepipe::cli::Cli;
use framepipe::filter::Chain;
use framepipe::frame::{FrameSize, SequencePattern};
use framepipe::output::OutputSpec;
use framepipe::source::InputSpec;

const FLAGS: &[&str] = &[
    "--input",
    "--size",
    "--fps",
    "--filter",
    "--backend",
    "--headless",
    "--output",
    "--frames",
    "--bands",
    "--busy-bands",
    "--ring",
    "--in-flight",
    "--pageable",
    "--streams",
    "--no-graphs",
    "--trace",
    "--timeline",
    "--trace-frames",
    "-q",
    "-v",
    "bench",
    "doctor",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "18446744073709551615",
    "18446744073709551616",
    "1e12",
    "NaN",
    "inf",
    "-0",
    "0.0001",
    "pattern",
    "32768x32768",
    "0x0",
    "64x48",
    "1x1",
    "cpu",
    "cuda",
    "per-band",
    "gray,gain:1e308,-1e308",
    "blur:0",
    "gauss:1e9",
    "%d%d.png",
    "/dev/null",
    "",
    ",,,",
    "::::",
];

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(FLAGS).prop_map(String::from),
        proptest::sample::select(VALUES).prop_map(String::from),
        "[ -~]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_argument_parser_never_panics(args in proptest::collection::vec(token(), 0..8)) {
        let _ = Cli::try_parse_from(std::iter::once("framepipe".to_string()).chain(args));
    }

    #[test]
    fn the_value_parsers_never_panic(s in "\\PC{0,40}") {
        let _ = s.parse::<Chain>();
        let _ = s.parse::<FrameSize>();
        let _ = SequencePattern::parse(&s);
        let _ = OutputSpec::parse(&format!("/tmp/{s}"));
        let _ = InputSpec::parse(Some(&s));
    }

    #[test]
    fn chains_from_filter_words_never_panic(
        parts in proptest::collection::vec(
            (proptest::sample::select(&["copy", "invert", "gray", "gain", "blur", "gauss", "sobel", "sharpen", "median3", "x"][..]),
             proptest::collection::vec(proptest::sample::select(&["", "0", "1", "-1", "3", "1e308", "nan", "2.5", "99999999999"][..]), 0..3)),
            1..5)
    ) {
        let text: Vec<String> = parts
            .iter()
            .map(|(name, nums)| if nums.is_empty() { name.to_string() } else { format!("{name}:{}", nums.join(",")) })
            .collect();
        if let Ok(chain) = text.join(",").parse::<Chain>() {
            // What parses prints back as something that parses to the same chain.
            prop_assert_eq!(chain.to_string().parse::<Chain>().ok(), Some(chain));
        }
    }
}

proptest! {
    // Each case starts the real binary: few cases, small frames.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_binary_exits_0_or_1_on_random_options(args in proptest::collection::vec(token(), 0..6)) {
        let mut all = vec!["--input", "pattern", "--size", "32x24", "--fps", "0", "--headless", "--frames", "2", "-q"];
        all.extend(args.iter().map(String::as_str));
        let dir = TempDir::new("fuzz"); // whatever a random option writes lands here
        let out = framepipe_in(dir.path(), &all, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        prop_assert!(!err.contains("panicked"), "{:?} panicked:\n{}", all, err);
        prop_assert!(matches!(out.status.code(), Some(0) | Some(1)), "{:?}: {:?}\n{}", all, out.status, err);
    }
}
