//! Every `scripts/run.sh` example in README.md and the guide (`docs/*.md`) runs as written:
//! each is taken from the page, run headless (a window example gets `--headless`, an endless one `--frames`) in
//! a folder holding the media it names (`clip.mp4`, `photo.jpg`, made here), and must exit 0.
//! Examples that need hardware or a network this machine lacks (a camera index, an rtsp://
//! URL) are reported as not run.
#![cfg(feature = "opencv")]

use crate::common;

use std::time::Duration;

use common::run::{framepipe_in, make_clip, TempDir};

/// README.md, then every page of the guide (`docs/*.md`, by name).
fn pages() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    std::iter::once(root.join("README.md"))
        .chain(docs)
        .map(|p| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `scripts/run.sh` example lines of the README and the guide, split into arguments
/// like a shell would (single quotes only, which is what the pages use), comments dropped.
fn examples() -> Vec<Vec<String>> {
    pages()
        .lines()
        .filter(|l| l.starts_with("scripts/run.sh"))
        .map(|l| {
            let code = l.split(" # ").next().unwrap_or(l);
            let mut args = Vec::new();
            let mut cur = String::new();
            let (mut quoted, mut any) = (false, false);
            for c in code.trim_start_matches("scripts/run.sh").chars() {
                match c {
                    '\'' => {
                        quoted = !quoted;
                        any = true;
                    }
                    ' ' if !quoted => {
                        if any {
                            args.push(std::mem::take(&mut cur));
                            any = false;
                        }
                    }
                    c => {
                        cur.push(c);
                        any = true;
                    }
                }
            }
            if any {
                args.push(cur);
            }
            args
        })
        .collect()
}

fn run(dir: &TempDir, args: &[String]) -> common::run::Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    framepipe_in(dir.path(), &args, Duration::from_secs(120))
}

#[test]
fn every_run_example_in_the_readme_runs() {
    let dir = TempDir::new("readme");
    // The media the examples name, made by framepipe itself.
    make_clip(dir.join("clip.mp4").to_str().unwrap(), "640x360", "150");
    make_clip(dir.join("photo%d.png").to_str().unwrap(), "320x240", "1");
    let png = opencv::imgcodecs::imread(
        dir.join("photo0.png").to_str().unwrap(),
        opencv::imgcodecs::IMREAD_COLOR,
    )
    .unwrap();
    let jpg = dir.join("photo.jpg").display().to_string();
    assert!(opencv::imgcodecs::imwrite(&jpg, &png, &opencv::core::Vector::new()).unwrap());

    let examples = examples();
    assert!(
        examples.len() >= 8,
        "README examples not found: {examples:?}"
    );
    let (mut ran, mut skipped) = (0, Vec::new());
    for mut args in examples {
        let input = args
            .iter()
            .position(|a| a == "--input")
            .and_then(|i| args.get(i + 1))
            .cloned();
        if let Some(i) = input.as_deref() {
            if i.parse::<u32>().is_ok() || i.contains("://") {
                skipped.push(args.join(" "));
                continue; // a camera or a network stream: not on this machine
            }
        }
        if !args.iter().any(|a| a == "--headless") {
            args.push("--headless".into());
        }
        if !args.iter().any(|a| a == "--frames") {
            args.extend(["--frames".into(), "5".into()]);
        }
        // The examples' kernel files are the repository's.
        let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/");
        let user_kernel = args.iter().any(|a| a.contains("kernel:"));
        for a in &mut args {
            *a = a.replace("kernel:examples/", &format!("kernel:{examples}"));
            if let Some(file) = a.strip_prefix("examples/") {
                *a = format!("{examples}{file}");
            }
            // The detector scripts/setup.sh installs for the project.
            if let Some(file) = a.strip_prefix("target/ort/") {
                *a = format!("{}/target/ort/{file}", env!("CARGO_MANIFEST_DIR"));
            }
        }
        let out = run(&dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        if user_kernel && framepipe::backend::device::probe().is_err() {
            // Without CUDA a kernel file is refused, as documented, with the reason.
            assert_eq!(out.status.code(), Some(1), "{args:?}:\n{err}");
            assert!(err.contains("needs the CUDA backend"), "{args:?}:\n{err}");
            skipped.push(format!("{} (refused: no CUDA)", args.join(" ")));
            continue;
        }
        assert!(
            out.status.success(),
            "README example {args:?} failed:\n{err}"
        );
        ran += 1;
    }
    println!("README: {ran} examples ran; not run here (camera, network, or a kernel without CUDA): {skipped:?}");
    assert!(
        dir.join("frames/00000.png").exists(),
        "the frames/ example wrote nothing"
    );
}

/// The long options named in `heads` (the first words of an entry), as `--name`.
fn long_names<'a>(heads: impl Iterator<Item = &'a str>) -> std::collections::BTreeSet<String> {
    heads
        .flat_map(|head| head.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

/// The long options `--help` lists: each entry's first line (`-i, --input <SOURCE>`), and
/// the aliases it gives (`[alias: --re]`).
fn help_options(help: &str) -> std::collections::BTreeSet<String> {
    long_names(help.lines().map(str::trim_start).filter(|l| {
        l.starts_with("--")
            || (l.starts_with('-') && l.get(2..4) == Some(", "))
            || l.starts_with("[alias")
    }))
}

/// The long options the table of `docs/options.md` documents: each row's first cell.
fn documented_options(page: &str) -> std::collections::BTreeSet<String> {
    long_names(page.lines().filter(|l| l.starts_with("| `")).map(|l| {
        l.trim_start_matches('|')
            .split('|')
            .next()
            .unwrap_or_default()
    }))
}

#[test]
fn the_options_reference_lists_what_help_lists() {
    let help = std::process::Command::new(common::run::bin())
        .arg("--help")
        .output()
        .expect("framepipe --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let mut listed = help_options(&help);
    listed.remove("--help");
    listed.remove("--version");
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/options.md"))
        .expect("docs/options.md");
    let documented = documented_options(&page);
    let missing: Vec<_> = listed.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&listed).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/options.md against --help: not documented {missing:?}; documented but not an option {extra:?}"
    );
}

#[test]
fn the_readme_stays_short() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    assert!(
        readme.len() <= 25 * 1024,
        "README.md is {} bytes",
        readme.len()
    );
    for link in readme.split("](").skip(1) {
        let target = link.split(')').next().unwrap_or_default();
        let file = target.split('#').next().unwrap_or_default();
        if file.is_empty() || file.contains("://") {
            continue;
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        assert!(
            path.exists(),
            "README.md links to {target}, which is missing"
        );
    }
}

/// `docs/options.md`'s table is the command line's own help (`cli::options_markdown`), so the
/// page can't drift from `--help`; `FRAMEPIPE_BLESS=1` writes the table again.
#[test]
fn the_options_page_is_the_help() {
    const BEGIN: &str = "<!-- made from --help: begin -->\n";
    const END: &str = "<!-- made from --help: end -->\n";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/options.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = page
        .split_once(BEGIN)
        .expect("docs/options.md marks its table");
    let (table, tail) = rest
        .split_once(END)
        .expect("docs/options.md ends its table");
    let made = framepipe::cli::options_markdown();
    if std::env::var_os("FRAMEPIPE_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{BEGIN}{made}{END}{tail}")).unwrap();
        return;
    }
    assert!(
        table == made,
        "docs/options.md's table differs from --help: FRAMEPIPE_BLESS=1 cargo test --release --test tests readme::the_options_page_is_the_help writes it again"
    );
}
