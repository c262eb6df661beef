//! Inputs from a file (`--inputs FILE`) and this process's shard of them (`--shard K/N`):
//! when a camera wall outgrows one machine, several framepipes share one list, each placed
//! by a scheduler (a Kubernetes indexed Job or StatefulSet), none talking to another.
//!
//! The list: one input a line, written as `--input` takes it, or `NAME = SOURCE` to give it
//! a name of its own, or `NAME [KEY=VALUE, …] = SOURCE` to give it settings of its own
//! (`PerInput`: `detect=on|off`, `detect-fps=N`, `record=on|off`, `segment=`, `retain=`,
//! `output=`, `decode=cpu|gpu|auto`); `#` starts a comment line; blank lines are skipped.
//! An input's name is its own (`NAME = …`, one input's only) or its source text (a source
//! listed twice unnamed is two inputs, as `-i x -i x` is). `--input` flags come first, then
//! the file's lines: an input's number `{n}` is its place in that whole list, the same in
//! every shard.
//!
//! The shard: input `name` belongs to the shard whose score `mix(name, k)` is highest
//! (rendezvous hashing). Each input's place depends on its own name and `N` alone, so
//! adding or removing a camera moves no other one, and changing `N` moves only the inputs
//! the new shard wins (about 1 in N); modulo over a hash would move almost all of them. The
//! hash is FNV-1a (the `fnv` crate) then SplitMix64's finaliser, not the standard
//! library's, whose hasher may change between Rust releases: every framepipe version and
//! machine must place an input alike.
//!
//! Invariants: every input of the list is in exactly one shard of `N`; the choice depends
//! only on the input's name, `K` and `N`; `K` comes from the flag, or from the environment
//! an orchestrator gives (`JOB_COMPLETION_INDEX` of an indexed Job, the `-ORDINAL` that ends
//! a StatefulSet pod's host name), never guessed.

use std::fmt;

/// The environment variable of a Kubernetes indexed Job's completion index.
pub const JOB_INDEX_VARIABLE: &str = "JOB_COMPLETION_INDEX";
/// The most lines an inputs file may hold.
pub const MAX_LINES: usize = 100_000;
/// The longest an input's line may be, bytes.
const MAX_LINE: usize = 8192;
/// The largest inputs file read, bytes: 100,000 lines of 160 bytes. A larger one (or a
/// device such as `/dev/zero`) is refused before it is read whole.
pub const MAX_BYTES: u64 = 16 << 20;

pub use super::entry::{file_safe, Entry, PerInput};

/// ", camera 'NAME'" (or ", camera #K" for one with no name) in a camera file's mistake;
/// nothing for the file's own.
fn which_camera(camera: &str) -> String {
    match camera {
        "" => String::new(),
        c if c.starts_with('#') => format!(", camera {c}"),
        c => format!(", camera '{c}'"),
    }
}

/// What is wrong with an inputs file or a `--shard`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardError {
    /// The file can't be read.
    #[error("--inputs '{path}' can't be read: {why}")]
    Unreadable {
        /// The file.
        path: String,
        /// The system's reason.
        why: String,
    },
    /// A camera file's mistake.
    #[error("--inputs '{path}'{}: {why}", which_camera(camera))]
    Camera {
        /// The file.
        path: String,
        /// The camera's name, or `#K` (its place) where it has none; empty for the file.
        camera: String,
        /// What is wrong.
        why: String,
    },
    /// A line that is no input.
    #[error("--inputs '{path}', line {line}: {why}")]
    Line {
        /// The file.
        path: String,
        /// Its number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// Two inputs with one name.
    #[error("--inputs: two inputs are named '{0}' (each name is one input's: rename one)")]
    NameTwice(String),
    /// Too many lines.
    #[error("--inputs '{path}' has more than {MAX_LINES} lines")]
    TooLong {
        /// The file.
        path: String,
    },
    /// `--shard` that is not `K/N` or `N`.
    #[error("--shard '{0}': write K/N (this is shard K of N, K from 0) or N (K from the environment: {JOB_INDEX_VARIABLE}, or the -ORDINAL ending a StatefulSet pod's host name)")]
    NotAShard(String),
    /// `K` not below `N`.
    #[error("--shard {k}/{n}: K counts from 0 and must be below N")]
    OutOfRange {
        /// The shard asked for.
        k: usize,
        /// How many there are.
        n: usize,
    },
    /// `--shard N` with no index in the environment.
    #[error("--shard {0}: which shard this is can't be told: set {JOB_INDEX_VARIABLE} (a Kubernetes indexed Job does), run as a StatefulSet pod (its host name ends in -ORDINAL), or write --shard K/{0}")]
    NoIndex(usize),
}

/// This process's shard of the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which, from 0.
    pub k: usize,
    /// Of how many.
    pub n: usize,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// Where a shard's index may come from besides the flag.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// `JOB_COMPLETION_INDEX`.
    pub job_index: Option<String>,
    /// The host name (a StatefulSet pod's is `NAME-ORDINAL`).
    pub host_name: Option<String>,
}

impl Environment {
    /// This process's.
    pub fn of_process() -> Self {
        Self {
            job_index: std::env::var(JOB_INDEX_VARIABLE).ok(),
            host_name: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string()),
        }
    }

    /// The shard index it gives, if any.
    fn index(&self) -> Option<usize> {
        if let Some(k) = &self.job_index {
            return k.trim().parse().ok();
        }
        let host = self.host_name.as_deref()?;
        let (_, ordinal) = host.rsplit_once('-')?;
        ordinal.parse().ok()
    }
}

impl Shard {
    /// `--shard K/N` or `--shard N` (K from `env`).
    pub fn parse(text: &str, env: &Environment) -> Result<Self, ShardError> {
        let bad = || ShardError::NotAShard(text.to_string());
        let number = |s: &str| s.trim().parse::<usize>().map_err(|_| bad());
        let (k, n) = match text.split_once('/') {
            Some((k, n)) => (number(k)?, number(n)?),
            None => {
                let n = number(text)?;
                (env.index().ok_or(ShardError::NoIndex(n))?, n)
            }
        };
        if n == 0 {
            return Err(bad());
        }
        if k >= n {
            return Err(ShardError::OutOfRange { k, n });
        }
        Ok(Self { k, n })
    }

    /// Whether input `name` is this shard's (module doc).
    pub fn takes(&self, name: &str) -> bool {
        owner(name, self.n) == self.k
    }
}

/// The shard of `n` that input `name` belongs to: the one whose score is highest.
pub fn owner(name: &str, n: usize) -> usize {
    let key = fnv1a(name.as_bytes());
    (0..n)
        .max_by_key(|&k| (mix(key ^ mix(k as u64 + 1)), std::cmp::Reverse(k)))
        .unwrap_or(0)
}

/// FNV-1a, 64 bits (the `fnv` crate's, from its standard basis: fixed by the algorithm,
/// so every version places an input alike).
fn fnv1a(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::default();
    h.write(bytes);
    h.finish()
}

/// SplitMix64's finaliser: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The inputs of `--input` flags and an inputs file's `text`, in that order, named and
/// checked (module doc).
pub fn list(flags: &[String], path: &str, text: &str) -> Result<Vec<Entry>, ShardError> {
    if path.ends_with(".toml") {
        let flags = list(flags, "", "")?;
        let all = super::cameras::list(flags, text).map_err(|m| ShardError::Camera {
            path: path.into(),
            camera: m.camera,
            why: m.why,
        })?;
        return no_name_twice(all);
    }
    let mut entries: Vec<Entry> = flags
        .iter()
        .enumerate()
        .map(|(n, s)| Entry::unnamed(s.clone(), n, PerInput::default()))
        .collect();
    for (i, line) in text.lines().enumerate() {
        if i >= MAX_LINES {
            return Err(ShardError::TooLong { path: path.into() });
        }
        let at = |why: &str| ShardError::Line {
            path: path.into(),
            line: i + 1,
            why: why.into(),
        };
        if line.len() > MAX_LINE {
            return Err(at(&format!("longer than {MAX_LINE} bytes")));
        }
        if line
            .chars()
            .any(|c| c.is_control() && c != '\t' && c != '\r')
        {
            return Err(at("holds a control character"));
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = entries.len();
        entries.push(match named(line).map_err(|e| at(&e))? {
            (Some(name), source, own) => Entry {
                name,
                source,
                n,
                own,
            },
            (None, source, own) => Entry::unnamed(source, n, own),
        });
    }
    no_name_twice(entries)
}

/// `entries`, where no name is given twice: a source listed twice unnamed (`-i clip.mp4
/// -i clip.mp4`) is the same input twice, told apart by `{n}`.
fn no_name_twice(entries: Vec<Entry>) -> Result<Vec<Entry>, ShardError> {
    let mut names: Vec<(&str, bool)> = entries
        .iter()
        .map(|e| (e.name.as_str(), e.is_named()))
        .collect();
    names.sort_unstable();
    let twice = names
        .windows(2)
        .find(|w| w[0].0 == w[1].0 && (w[0].1 || w[1].1));
    if let Some(w) = twice {
        return Err(ShardError::NameTwice(w[0].0.to_string()));
    }
    Ok(entries)
}

/// A line's name, source and settings: `NAME = SOURCE` or `NAME [KEY=VALUE, …] = SOURCE`
/// (NAME of letters, digits, `.`, `-`, `_`, not dots alone), or the source alone (no name:
/// None).
fn named(line: &str) -> Result<(Option<String>, String, PerInput), String> {
    let whole = || Ok((None, line.to_string(), PerInput::default()));
    let split = line
        .split_once(" = ")
        .or_else(|| line.strip_suffix(" =").map(|name| (name, "")));
    let Some((head, source)) = split else {
        return whole();
    };
    let (head, source) = (head.trim(), source.trim());
    let (name, own) = match head.split_once('[') {
        Some((name, rest)) if rest.ends_with(']') => (name.trim(), Some(&rest[..rest.len() - 1])),
        _ => (head, None),
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if name.is_empty() || !name.chars().all(plain) {
        // Not a name: the whole line is the source (a GStreamer pipeline with " = ").
        return whole();
    }
    if !super::entry::valid_name(name) {
        return Err(format!(
            "'{name}' can't name an input (letters, digits, '.', '-' and '_', not dots alone)"
        ));
    }
    if source.is_empty() {
        return Err("a name with no source after ' = '".into());
    }
    let own = own.map(PerInput::parse).transpose()?.unwrap_or_default();
    Ok((Some(name.to_string()), source.to_string(), own))
}

/// Reads the inputs file `path` and lists it after `flags`.
pub fn read(flags: &[String], path: &str) -> Result<Vec<Entry>, ShardError> {
    let text = read_text(path)?;
    list(flags, path, &text)
}

/// The inputs file's text, read only where it is a regular file of at most `MAX_BYTES`: it
/// is opened without blocking (a FIFO with no writer would hold `open` for ever) and read
/// no further than the bound (a device, or a file that grows while it is read, can't take
/// unbounded memory).
pub fn read_text(path: &str) -> Result<String, ShardError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let refused = |why: String| ShardError::Unreadable {
        path: path.into(),
        why,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| refused(e.to_string()))?;
    let meta = file.metadata().map_err(|e| refused(e.to_string()))?;
    if !meta.is_file() {
        return Err(refused(
            "not a regular file (a FIFO, a device or a folder is not an inputs list)".into(),
        ));
    }
    let too_large = || refused(format!("larger than {} MiB", MAX_BYTES >> 20));
    if meta.len() > MAX_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(e.to_string()))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| refused("not UTF-8 text".into()))
}

/// The entries of `all` that `shard` takes (every one without a shard).
pub fn select(all: &[Entry], shard: Option<Shard>) -> Vec<Entry> {
    all.iter()
        .filter(|e| shard.is_none_or(|s| s.takes(&e.name)))
        .cloned()
        .collect()
}

/// The inputs a run is given: every one listed (`--input` flags, then the file's lines),
/// the file, and this process's shard.
#[derive(Clone, Debug, Default)]
pub struct Roster {
    /// `--inputs`.
    pub file: Option<String>,
    /// `--shard`.
    pub shard: Option<Shard>,
    /// Every input listed, in order.
    pub all: Vec<Entry>,
}

impl Roster {
    /// The `--input` flags, `--inputs FILE` read after them, and `--shard` (its index from
    /// `env` where the flag has none).
    pub fn gather(
        flags: &[String],
        file: Option<&str>,
        shard: Option<&str>,
        env: &Environment,
    ) -> Result<Self, ShardError> {
        let shard = shard.map(|s| Shard::parse(s, env)).transpose()?;
        let all = match file {
            Some(path) => read(flags, path)?,
            None => list(flags, "", "")?,
        };
        Ok(Self {
            file: file.map(str::to_string),
            shard,
            all,
        })
    }

    /// The inputs this process runs: its shard's, or all.
    pub fn mine(&self) -> Vec<Entry> {
        select(&self.all, self.shard)
    }

    /// Whether the inputs come from a list (a file or a shard): an empty share then waits
    /// for the list to change instead of opening the default camera.
    pub fn listed(&self) -> bool {
        self.file.is_some() || self.shard.is_some()
    }

    /// The line that says what this process takes ("shard 1/3 of cams.txt: 4 of 10
    /// inputs: a, b, c, d"), where the inputs come from a list.
    pub fn describe(&self) -> Option<String> {
        if !self.listed() {
            return None;
        }
        let mine = self.mine();
        let whose = match (&self.shard, &self.file) {
            (Some(s), Some(f)) => format!("shard {s} of '{f}'"),
            (Some(s), None) => format!("shard {s} of the --input flags"),
            (None, Some(f)) => format!("'{f}'"),
            (None, None) => String::new(),
        };
        let names: Vec<&str> = mine.iter().map(|e| e.name.as_str()).take(16).collect();
        let more = match mine.len() > names.len() {
            true => format!(" and {} more", mine.len() - names.len()),
            false => String::new(),
        };
        Some(format!(
            "{whose}: {} of {} inputs{}{}{more}",
            mine.len(),
            self.all.len(),
            if names.is_empty() { "" } else { ": " },
            names.join(", ")
        ))
    }
}

/// How one list differs from another: the names added and removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// Names in the new list only.
    pub added: Vec<String>,
    /// Names in the old list only.
    pub removed: Vec<String>,
    /// Names in both whose source changed.
    pub changed: Vec<String>,
}

impl Change {
    /// `new` against `old`, in time linear in their lengths (a list of 100,000 inputs is
    /// compared within a second).
    pub fn between(old: &[Entry], new: &[Entry]) -> Self {
        use std::collections::HashMap;
        let by_name = |list: &[Entry]| -> HashMap<String, String> {
            list.iter()
                .map(|e| (e.name.clone(), e.source.clone()))
                .collect()
        };
        let (old_sources, new_sources) = (by_name(old), by_name(new));
        let mut c = Change::default();
        for e in new {
            match old_sources.get(&e.name) {
                None => c.added.push(e.name.clone()),
                Some(source) if *source != e.source => c.changed.push(e.name.clone()),
                Some(_) => {}
            }
        }
        c.removed = old
            .iter()
            .filter(|o| !new_sources.contains_key(&o.name))
            .map(|o| o.name.clone())
            .collect();
        c
    }

    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let said = |sign: &str, names: &[String]| {
            names
                .iter()
                .map(|n| format!("{sign}{n}"))
                .collect::<Vec<_>>()
        };
        parts.extend(said("+", &self.added));
        parts.extend(said("-", &self.removed));
        parts.extend(said("~", &self.changed));
        match parts.is_empty() {
            true => write!(f, "no change"),
            false => write!(f, "{}", parts.join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("rtsp://10.0.{}.{}/cam", i / 250, i % 250))
            .collect()
    }

    #[test]
    fn every_input_is_in_exactly_one_shard() {
        for n in 1..=7 {
            for name in names(300) {
                let shards: Vec<usize> = (0..n).filter(|&k| Shard { k, n }.takes(&name)).collect();
                assert_eq!(shards.len(), 1, "{name} in {shards:?} of {n}");
            }
        }
    }

    #[test]
    fn shards_are_about_even_and_a_new_shard_moves_about_one_in_n() {
        let all = names(3000);
        let count = |n: usize, k: usize| all.iter().filter(|a| owner(a, n) == k).count();
        for k in 0..4 {
            let c = count(4, k);
            assert!((600..=900).contains(&c), "shard {k} of 4 has {c} of 3000");
        }
        let moved = all.iter().filter(|a| owner(a, 4) != owner(a, 5)).count();
        // Rendezvous: only those the fifth shard wins move (about 600); modulo moves ~2400.
        assert!((450..=750).contains(&moved), "{moved} moved");
        assert!(all
            .iter()
            .all(|a| owner(a, 4) == owner(a, 5) || owner(a, 5) == 4));
    }

    #[test]
    fn placement_is_fixed_across_versions() {
        // Written down once: a change of the hash would move every camera of a deployment.
        let placed: Vec<usize> = ["cam-0", "cam-1", "cam-2", "lobby", "udp://239.0.0.1:5000"]
            .iter()
            .map(|n| owner(n, 3))
            .collect();
        assert_eq!(placed, vec![1, 2, 2, 0, 2]);
    }

    #[test]
    fn a_list_reads_names_comments_and_flags() {
        let text = "# cameras\n\nlobby = rtsp://10.0.0.5/s?a=b\n  udp://239.0.0.1:5000  \nvideotestsrc pattern = ball ! appsink\n";
        let l = list(&["pattern".into()], "f", text).unwrap();
        let got: Vec<(&str, &str, usize)> = l
            .iter()
            .map(|e| (e.name.as_str(), e.source.as_str(), e.n))
            .collect();
        assert_eq!(
            got,
            vec![
                ("pattern", "pattern", 0),
                ("lobby", "rtsp://10.0.0.5/s?a=b", 1),
                ("udp://239.0.0.1:5000", "udp://239.0.0.1:5000", 2),
                (
                    "videotestsrc pattern = ball ! appsink",
                    "videotestsrc pattern = ball ! appsink",
                    3
                ),
            ]
        );
        assert_eq!(l[2].file_name(), "udp___239.0.0.1_5000");
        assert_eq!(file_safe("../x"), "_._x");
    }

    #[test]
    fn an_input_of_the_list_has_settings_of_its_own() {
        let text = "gate [detect=off, decode=gpu] = rtsp://cam/1\ndock [detect-fps=2.5, detect=on] = x.mp4\n";
        let l = list(&[], "f", text).unwrap();
        assert_eq!(l[0].own.detect, Some(false));
        assert_eq!(l[0].own.decode, Some(crate::source::open::Decode::Gpu));
        assert_eq!(l[1].own.decode, None);
        assert_eq!(
            (l[1].own.detect, l[1].own.detect_fps()),
            (Some(true), Some(2.5))
        );
        for bad in [
            "a [detect=maybe] = x",
            "a [fps=2] = x",
            "a [detect-fps=0] = x",
            "a [decode=nvdec] = x",
            "a [decode=opencv] = x",
        ] {
            assert!(list(&[], "f", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_lists_are_refused_naming_the_line() {
        let e = list(&[], "f", "a = x\na = y\n").unwrap_err();
        assert_eq!(e, ShardError::NameTwice("a".into()));
        let e = list(&["a".into()], "f", "a = y\n").unwrap_err();
        assert_eq!(e, ShardError::NameTwice("a".into()));
        // The same source twice, unnamed: two inputs, as `-i x -i x` always was.
        assert_eq!(
            list(&["x".into(), "x".into()], "f", "x\n").unwrap().len(),
            3
        );
        let e = list(&[], "f", "ok\ncam = \n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = list(&[], "f", "a\u{1b}[2Jb\n").unwrap_err();
        assert!(e.to_string().contains("control character"), "{e}");
    }

    #[test]
    fn a_shard_comes_from_the_flag_or_the_orchestrator() {
        let none = Environment::default();
        assert_eq!(Shard::parse("1/3", &none), Ok(Shard { k: 1, n: 3 }));
        assert_eq!(
            Shard::parse("3/3", &none),
            Err(ShardError::OutOfRange { k: 3, n: 3 })
        );
        assert_eq!(Shard::parse("3", &none), Err(ShardError::NoIndex(3)));
        assert!(Shard::parse("0/0", &none).is_err());
        assert!(Shard::parse("a/b", &none).is_err());
        let job = Environment {
            job_index: Some("2".into()),
            host_name: Some("wall-0".into()),
        };
        assert_eq!(Shard::parse("4", &job), Ok(Shard { k: 2, n: 4 }));
        let pod = Environment {
            job_index: None,
            host_name: Some("framepipe-wall-3".into()),
        };
        assert_eq!(Shard::parse("4", &pod), Ok(Shard { k: 3, n: 4 }));
    }

    #[test]
    fn a_change_names_what_was_added_removed_and_changed() {
        let old = list(&[], "f", "a = 1\nb = 2\nc = 3\n").unwrap();
        let new = list(&[], "f", "a = 1\nc = 4\nd = 5\n").unwrap();
        let c = Change::between(&old, &new);
        assert_eq!(c.to_string(), "+d -b ~c");
        assert!(Change::between(&old, &old).is_empty());
    }
}
