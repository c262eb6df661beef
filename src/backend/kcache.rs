//! Compiled kernels kept on disk between runs, so that a run starts without NVRTC (about
//! 50 ms for the built-in kernels on the H200, more for a user's). An entry is keyed by
//! everything the compiled code depends on (`nvrtc::disk_key`: framepipe's version, NVRTC's
//! and the driver's versions, the program's name, options, header and source): a changed
//! source, option, architecture or toolkit gets another entry.
//!
//! Invariants: an entry is never trusted: it is used only when its magic, its whole key,
//! its length and its checksum all match, else it is compiled again and rewritten (a damaged
//! entry with a warning that names it); entries are written whole under a temporary name
//! and renamed (`paths::write_atomically`), so a crash or a concurrent run never leaves half
//! a file; a cache that can't be read or written costs a compile, never the run.

use std::path::{Path, PathBuf};

/// What a compile gives: a cubin for a real architecture, or PTX text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A cubin the driver loads as it is.
    Cubin(Vec<u8>),
    /// PTX the driver compiles when it loads the module.
    Ptx(String),
}

/// How a lookup went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The entry was on disk and whole.
    Hit,
    /// There was none (or one for another key): compiled and stored.
    Compiled,
    /// The entry was damaged (why): compiled again and replaced.
    Replaced(Damage),
}

/// How a cache entry on disk is damaged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Damage {
    /// It ends before its lengths say.
    #[error("cut short at byte {0}")]
    CutShort(usize),
    /// It does not start with the magic.
    #[error("not a framepipe kernel cache entry")]
    NotAnEntry,
    /// A length over what memory can hold.
    #[error("a length past memory")]
    PastMemory,
    /// Its checksum is not its payload's.
    #[error("its checksum does not match")]
    Checksum,
    /// Bytes after its end.
    #[error("bytes after its end")]
    Trailing,
    /// PTX that is not UTF-8.
    #[error("PTX that is not text")]
    NotText,
    /// A kind byte that is neither cubin nor PTX.
    #[error("an unknown kind")]
    UnknownKind,
}

const MAGIC: &[u8; 6] = b"FPKC1\n";

/// A folder of compiled kernels.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

/// FNV-1a over `bytes` from `basis`: a stable hash (the file's name and its checksum).
fn fnv(bytes: &[u8], basis: u64) -> u64 {
    use std::hash::Hasher;
    let mut h = fnv::FnvHasher::with_key(basis);
    h.write(bytes);
    h.finish()
}

/// FNV-1a's offset basis (64 bits).
const BASIS: u64 = 0xcbf2_9ce4_8422_2325;

impl DiskCache {
    /// The user's cache: `$FRAMEPIPE_CACHE_DIR`, else `$XDG_CACHE_HOME/framepipe/kernels`,
    /// else `~/.cache/framepipe/kernels`; None where there is no home to put it in, or
    /// `FRAMEPIPE_CACHE_DIR` is empty (the cache off).
    pub fn user() -> Option<Self> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        if let Some(dir) = std::env::var_os("FRAMEPIPE_CACHE_DIR") {
            return (!dir.is_empty()).then(|| Self::at(PathBuf::from(dir)));
        }
        let base = var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(Self::at(base.join("framepipe").join("kernels")))
    }

    /// A cache in `dir` (made when first written).
    pub fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// Where the entry for `key` lives.
    pub fn path_of(&self, key: &str) -> PathBuf {
        let b = key.as_bytes();
        self.dir.join(format!(
            "{:016x}{:016x}.kernel",
            fnv(b, BASIS),
            fnv(b, BASIS ^ 0x5bd1_e995)
        ))
    }

    /// The entry for `key` from disk, or `compile`d (and stored) where there is no whole
    /// entry for exactly this key.
    pub fn get_or_compile<E>(
        &self,
        key: &str,
        compile: impl FnOnce() -> Result<Entry, E>,
    ) -> Result<(Entry, Outcome), E> {
        let path = self.path_of(key);
        let outcome = match std::fs::read(&path) {
            Ok(bytes) => match decode(&bytes, key) {
                Ok(Some(entry)) => return Ok((entry, Outcome::Hit)),
                Ok(None) => Outcome::Compiled, // another key's entry (or an older format)
                Err(why) => Outcome::Replaced(why),
            },
            Err(_) => Outcome::Compiled,
        };
        if let Outcome::Replaced(why) = &outcome {
            crate::warn!(
                "the kernel cache entry {} is damaged ({why}); compiling again",
                path.display()
            );
        }
        let entry = compile()?;
        self.store(&path, key, &entry);
        Ok((entry, outcome))
    }

    /// Writes an entry whole (a failure only costs the next run a compile).
    fn store(&self, path: &Path, key: &str, entry: &Entry) {
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        if let Err(e) = crate::paths::write_atomically(path, &encode(key, entry)) {
            crate::info!(
                "the kernel cache in {} can't be written ({e}); kernels are compiled at every start",
                self.dir.display()
            );
        }
    }
}

/// An entry's bytes: magic, key length and key, kind, payload length and payload, and the
/// payload's checksum.
fn encode(key: &str, entry: &Entry) -> Vec<u8> {
    let (kind, payload): (u8, &[u8]) = match entry {
        Entry::Cubin(b) => (b'B', b),
        Entry::Ptx(s) => (b'P', s.as_bytes()),
    };
    let mut out = Vec::with_capacity(MAGIC.len() + key.len() + payload.len() + 25);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&fnv(payload, BASIS).to_le_bytes());
    out
}

/// The entry in `bytes` when it is whole and for `key`: Ok(None) for another key's entry,
/// Err(why) for a damaged one.
fn decode(bytes: &[u8], key: &str) -> Result<Option<Entry>, Damage> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], Damage> {
        let end = at
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or(Damage::CutShort(bytes.len()))?;
        let s = &bytes[at..end];
        at = end;
        Ok(s)
    };
    let u64_of = |s: &[u8]| u64::from_le_bytes(s.try_into().expect("8 bytes"));
    if take(MAGIC.len())? != MAGIC {
        return Err(Damage::NotAnEntry);
    }
    let key_len = u64_of(take(8)?);
    let stored_key = take(usize::try_from(key_len).map_err(|_| Damage::PastMemory)?)?;
    if stored_key != key.as_bytes() {
        return Ok(None);
    }
    let kind = take(1)?[0];
    let len = u64_of(take(8)?);
    let payload = take(usize::try_from(len).map_err(|_| Damage::PastMemory)?)?.to_vec();
    let sum = u64_of(take(8)?);
    if sum != fnv(&payload, BASIS) {
        return Err(Damage::Checksum);
    }
    if at != bytes.len() {
        return Err(Damage::Trailing);
    }
    match kind {
        b'B' => Ok(Some(Entry::Cubin(payload))),
        b'P' => String::from_utf8(payload)
            .map(|s| Some(Entry::Ptx(s)))
            .map_err(|_| Damage::NotText),
        _ => Err(Damage::UnknownKind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn temp(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("fp-kcache-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn a_second_lookup_is_a_hit_and_a_changed_key_compiles() {
        let tmp = temp("hit");
        let dir = tmp.path().to_path_buf();
        let cache = DiskCache::at(dir.clone());
        let compiles = Cell::new(0);
        let compile = |what: &str| {
            compiles.set(compiles.get() + 1);
            Ok::<_, String>(Entry::Cubin(what.as_bytes().to_vec()))
        };
        let key = "source A\noptions --gpu-architecture=sm_90";
        let (e, o) = cache.get_or_compile(key, || compile("A")).unwrap();
        assert_eq!(
            (e, o, compiles.get()),
            (Entry::Cubin(b"A".to_vec()), Outcome::Compiled, 1)
        );
        let (e, o) = cache.get_or_compile(key, || compile("never")).unwrap();
        assert_eq!(
            (e, o, compiles.get()),
            (Entry::Cubin(b"A".to_vec()), Outcome::Hit, 1)
        );
        // Another source, another option: compiled, each kept beside the other.
        for other in [
            "source B\noptions --gpu-architecture=sm_90",
            "source A\noptions --gpu-architecture=sm_80",
        ] {
            let (_, o) = cache.get_or_compile(other, || compile("B")).unwrap();
            assert_eq!(o, Outcome::Compiled);
        }
        assert_eq!(compiles.get(), 3);
        let (_, o) = cache.get_or_compile(key, || compile("never")).unwrap();
        assert_eq!(o, Outcome::Hit);
        // PTX entries too.
        let (e, _) = cache
            .get_or_compile("ptx", || Ok::<_, String>(Entry::Ptx(".version 8.0".into())))
            .unwrap();
        assert_eq!(
            cache
                .get_or_compile("ptx", || Err::<Entry, String>("no".into()))
                .unwrap(),
            (e, Outcome::Hit)
        );
    }

    #[test]
    fn damaged_entries_are_compiled_again_never_trusted() {
        let tmp = temp("damaged");
        let dir = tmp.path().to_path_buf();
        let cache = DiskCache::at(dir.clone());
        let key = "the key";
        let good = Entry::Cubin(vec![7; 1000]);
        cache
            .get_or_compile(key, || Ok::<_, String>(good.clone()))
            .unwrap();
        let path = cache.path_of(key);
        let whole = std::fs::read(&path).unwrap();
        let damages: Vec<(&str, Vec<u8>)> = vec![
            ("truncated", whole[..whole.len() / 2].to_vec()),
            ("empty", Vec::new()),
            ("a flipped payload byte", {
                let mut b = whole.clone();
                let n = b.len();
                b[n - 20] ^= 1;
                b
            }),
            ("garbage", b"hello, this is not a kernel".to_vec()),
            ("a huge length", {
                let mut b = whole.clone();
                b[6..14].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            }),
            ("trailing bytes", [whole.clone(), vec![0]].concat()),
        ];
        for (what, bytes) in damages {
            std::fs::write(&path, &bytes).unwrap();
            let (e, o) = cache
                .get_or_compile(key, || Ok::<_, String>(good.clone()))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(e, good, "{what}");
            assert!(matches!(o, Outcome::Replaced(_)), "{what}: {o:?}");
            // Rewritten whole: the next lookup is a hit.
            let (_, o) = cache
                .get_or_compile(key, || Err::<Entry, String>("compiled".into()))
                .unwrap();
            assert_eq!(o, Outcome::Hit, "{what}");
        }
    }

    #[test]
    fn an_unwritable_cache_still_compiles() {
        let cache = DiskCache::at(PathBuf::from("/proc/framepipe-no-such-cache"));
        let (e, o) = cache
            .get_or_compile("k", || Ok::<_, String>(Entry::Ptx("p".into())))
            .unwrap();
        assert_eq!((e, o), (Entry::Ptx("p".into()), Outcome::Compiled));
        assert!(cache
            .get_or_compile("k", || Err::<Entry, String>("fails".into()))
            .is_err());
    }
}
