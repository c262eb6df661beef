//! A user's kernel in the chain: `kernel:FILE` followed by `radius=R`, `fn=NAME` and the
//! kernel's own parameters as `name=value`.
//!
//! Parsing reads the file and finds its `__global__` functions (comments stripped, no
//! compiler needed), so that every mistake a user can make on the command line (a missing
//! file, an unknown function or parameter, a value of the wrong type) is reported before
//! any frame is read, also on a machine without CUDA. Compiling is the CUDA backend's
//! (`backend::kernels`); a reload re-reads the same file with the same settings.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest kernel file read (a kernel is a few hundred lines).
const MAX_SOURCE: u64 = 1 << 20;
/// The largest radius a kernel may declare.
pub const MAX_RADIUS: usize = 255;

/// A parameter's value, typed by the kernel's declaration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// `float`.
    Float(f32),
    /// `int`.
    Int(i32),
    /// `unsigned` / `unsigned int`.
    Uint(u32),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Float(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Uint(v) => write!(f, "{v}"),
        }
    }
}

/// Why a `kernel:` filter can't be used: its spec, its file, or the function in it.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// `kernel:` without a file.
    #[error("filter 'kernel' needs a file: kernel:FILE.cu")]
    NoFile,
    /// A setting that is not `name=value`.
    #[error("'{setting}' after kernel:{file}: expected name=value (radius=R, fn=NAME or a parameter of the kernel)")]
    Setting {
        /// The file.
        file: String,
        /// As given.
        setting: String,
    },
    /// A radius out of range.
    #[error("kernel:{file}: radius '{value}' must be a whole number from 0 to {MAX_RADIUS}")]
    Radius {
        /// The file.
        file: String,
        /// As given.
        value: String,
    },
    /// A parameter given twice.
    #[error("kernel:{file}: parameter '{key}' is given twice")]
    GivenTwice {
        /// The file.
        file: String,
        /// The parameter.
        key: String,
    },
    /// A setting whose key is not a name.
    #[error("kernel:{file}: '{key}' is not a parameter name")]
    NotAName {
        /// The file.
        file: String,
        /// As given.
        key: String,
    },
    /// The file can't be read.
    #[error("kernel file '{file}': {source}")]
    Unreadable {
        /// The file.
        file: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is not a regular file.
    #[error("kernel file '{0}' is not a regular file")]
    NotRegular(String),
    /// The file says it is over the limit.
    #[error("kernel file '{file}' is {len} bytes; a kernel file is at most {MAX_SOURCE}")]
    TooLarge {
        /// The file.
        file: String,
        /// Its size.
        len: u64,
    },
    /// The file read past the limit (its size lied).
    #[error("kernel file '{0}' is larger than {MAX_SOURCE} bytes, the most a kernel file may be")]
    ReadTooLarge(String),
    /// The file is not UTF-8.
    #[error("kernel file '{0}' is not UTF-8 text")]
    NotUtf8(String),
    /// The file holds a NUL byte.
    #[error("kernel file '{0}' holds a NUL byte")]
    Nul(String),
    /// `fn=NAME` names no `__global__` function.
    #[error("{file} has no __global__ function '{name}' (it has: {has})")]
    NoSuchFunction {
        /// The file.
        file: String,
        /// As given.
        name: String,
        /// The functions it has.
        has: String,
    },
    /// No `__global__` function in the file.
    #[error("{0} has no __global__ function: declare one as FP_KERNEL name(fp_band band) (see framepipe.cuh)")]
    NoFunction(String),
    /// Several, and no `fn=`.
    #[error("{file} has several __global__ functions ({has}): choose one with fn=NAME")]
    SeveralFunctions {
        /// The file.
        file: String,
        /// The functions it has.
        has: String,
    },
    /// Not `extern "C"`.
    #[error("kernel '{kernel}' in {file} must be declared extern \"C\" (FP_KERNEL does that), so that framepipe can find it by name")]
    NotExternC {
        /// The function.
        kernel: String,
        /// The file.
        file: String,
    },
    /// The first parameter is not the band.
    #[error("kernel '{kernel}' in {file}: its first parameter must be `fp_band band` (see framepipe.cuh)")]
    FirstParameter {
        /// The function.
        kernel: String,
        /// The file.
        file: String,
    },
    /// A parameter not given.
    #[error("kernel '{kernel}' in {file} needs {param}=<{ty}>")]
    Needs {
        /// The function.
        kernel: String,
        /// The file.
        file: String,
        /// The parameter.
        param: String,
        /// Its type.
        ty: String,
    },
    /// A value that is not of its parameter's type.
    #[error("kernel '{kernel}': {param}={text} is not a valid {ty}")]
    BadValue {
        /// The function.
        kernel: String,
        /// The parameter.
        param: String,
        /// As given.
        text: String,
        /// Its type.
        ty: String,
    },
    /// A parameter of a type framepipe does not pass.
    #[error("kernel '{kernel}' in {file}: parameter '{param}' has type '{ty}'; framepipe passes float, int and unsigned parameters")]
    ParameterType {
        /// The function.
        kernel: String,
        /// The file.
        file: String,
        /// The parameter.
        param: String,
        /// Its type.
        ty: String,
    },
    /// A value for a parameter the function does not have.
    #[error("kernel '{kernel}' in {file} has no parameter '{unknown}' (its parameters: {known})")]
    NoParameter {
        /// The function.
        kernel: String,
        /// The file.
        file: String,
        /// As given.
        unknown: String,
        /// Its parameters, or "none".
        known: String,
    },
}

/// How the kernel was asked for: what the command line said.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The file, as given.
    pub path: PathBuf,
    /// `fn=NAME`: the `__global__` function, where the file has several.
    pub function: Option<String>,
    /// `radius=R`: rows the kernel reads above and below its pixel.
    pub radius: usize,
    /// The kernel's parameters, as given (`name`, `value` text), in the given order.
    pub given: Vec<(String, String)>,
}

/// A kernel file read and bound: its source, the function to run and its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct UserKernel {
    /// What the command line said.
    pub spec: Spec,
    /// The `__global__` function run.
    pub function: String,
    /// The arguments after the `fp_band`, in the signature's order.
    pub args: Vec<(String, Value)>,
    /// The file's text when it was read.
    pub source: Arc<str>,
}

impl UserKernel {
    /// Builds the spec from `kernel:FILE` and the `name=value` tokens after it, then loads it.
    pub fn parse(file: &str, settings: &[String]) -> Result<Self, KernelError> {
        if file.is_empty() {
            return Err(KernelError::NoFile);
        }
        let mut spec = Spec {
            path: PathBuf::from(file),
            function: None,
            radius: 0,
            given: Vec::new(),
        };
        // `kernel:FILE:NAME` where FILE:NAME is not itself a file.
        if let Some((f, name)) = file.rsplit_once(':') {
            if !Path::new(file).exists() && is_identifier(name) && !f.is_empty() {
                spec.path = PathBuf::from(f);
                spec.function = Some(name.to_string());
            }
        }
        for setting in settings {
            let Some((key, value)) = setting.split_once('=') else {
                return Err(KernelError::Setting {
                    file: file.into(),
                    setting: setting.clone(),
                });
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "radius" => {
                    spec.radius = value
                        .parse::<usize>()
                        .ok()
                        .filter(|r| *r <= MAX_RADIUS)
                        .ok_or_else(|| KernelError::Radius {
                            file: file.into(),
                            value: value.into(),
                        })?
                }
                "fn" | "function" => spec.function = Some(value.to_string()),
                _ if is_identifier(key) => {
                    if spec.given.iter().any(|(k, _)| k == key) {
                        return Err(KernelError::GivenTwice {
                            file: file.into(),
                            key: key.into(),
                        });
                    }
                    spec.given.push((key.to_string(), value.to_string()))
                }
                _ => {
                    return Err(KernelError::NotAName {
                        file: file.into(),
                        key: key.into(),
                    })
                }
            }
        }
        Self::load(spec)
    }

    /// Reads the spec's file and binds its parameters.
    pub fn load(spec: Spec) -> Result<Self, KernelError> {
        let source = read_source(&spec.path)?;
        Self::bind(spec, source.into())
    }

    /// The same kernel read again from its file (a reload).
    pub fn reload(&self) -> Result<Self, KernelError> {
        Self::load(self.spec.clone())
    }

    /// Binds `spec` to `source`: finds the function and gives each parameter its value.
    pub fn bind(spec: Spec, source: Arc<str>) -> Result<Self, KernelError> {
        let file = spec.path.display().to_string();
        let kernels = scan(&source);
        let chosen = choose(&spec, &kernels, &file)?;
        let args = bind_args(&spec, chosen, &file)?;
        Ok(Self {
            function: chosen.name.clone(),
            spec,
            args,
            source,
        })
    }

    /// The file's name for messages.
    pub fn file(&self) -> String {
        self.spec.path.display().to_string()
    }
}

impl fmt::Display for UserKernel {
    /// The chain syntax that gives this kernel again.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel:{}", self.spec.path.display())?;
        if let Some(name) = &self.spec.function {
            write!(f, ",fn={name}")?;
        }
        if self.spec.radius > 0 {
            write!(f, ",radius={}", self.spec.radius)?;
        }
        for (name, value) in &self.args {
            write!(f, ",{name}={value}")?;
        }
        Ok(())
    }
}

/// The kernels' names for a message: the first `NAMES_SHOWN`, then how many more.
fn names(kernels: &[Found]) -> String {
    const NAMES_SHOWN: usize = 10;
    if kernels.is_empty() {
        return "none".into();
    }
    let shown: Vec<&str> = kernels
        .iter()
        .take(NAMES_SHOWN)
        .map(|k| k.name.as_str())
        .collect();
    match kernels.len().saturating_sub(NAMES_SHOWN) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

/// The `__global__` function `spec` names, or the file's only one.
fn choose<'a>(spec: &Spec, kernels: &'a [Found], file: &str) -> Result<&'a Found, KernelError> {
    match &spec.function {
        Some(name) => {
            kernels
                .iter()
                .find(|k| &k.name == name)
                .ok_or_else(|| KernelError::NoSuchFunction {
                    file: file.into(),
                    name: name.clone(),
                    has: names(kernels),
                })
        }
        None => match kernels {
            [] => Err(KernelError::NoFunction(file.into())),
            [one] => Ok(one),
            _ => Err(KernelError::SeveralFunctions {
                file: file.into(),
                has: names(kernels),
            }),
        },
    }
}

/// The values `spec` gives `chosen`'s parameters after the band, in the signature's order;
/// refuses a function framepipe can't call and a value given to no parameter.
fn bind_args(spec: &Spec, chosen: &Found, file: &str) -> Result<Vec<(String, Value)>, KernelError> {
    let kernel = || chosen.name.clone();
    if !chosen.extern_c {
        return Err(KernelError::NotExternC {
            kernel: kernel(),
            file: file.into(),
        });
    }
    let mut params = chosen.params.iter();
    if params.next().is_none_or(|p| p.ty != "fp_band") {
        return Err(KernelError::FirstParameter {
            kernel: kernel(),
            file: file.into(),
        });
    }
    let args = params
        .map(|p| {
            let text = spec
                .given
                .iter()
                .find(|(k, _)| *k == p.name)
                .map(|(_, v)| v.as_str())
                .ok_or_else(|| KernelError::Needs {
                    kernel: kernel(),
                    file: file.into(),
                    param: p.name.clone(),
                    ty: p.ty.clone(),
                })?;
            Ok((p.name.clone(), value_of(text, p, chosen, file)?))
        })
        .collect::<Result<Vec<_>, KernelError>>()?;
    if let Some((unknown, _)) = spec
        .given
        .iter()
        .find(|(k, _)| !chosen.params.iter().any(|p| &p.name == k))
    {
        let known: Vec<&str> = chosen.params[1..].iter().map(|p| p.name.as_str()).collect();
        return Err(KernelError::NoParameter {
            kernel: kernel(),
            file: file.into(),
            unknown: unknown.clone(),
            known: if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            },
        });
    }
    Ok(args)
}

/// `text` as a value of parameter `p`'s type.
fn value_of(text: &str, p: &Param, chosen: &Found, file: &str) -> Result<Value, KernelError> {
    let bad = || KernelError::BadValue {
        kernel: chosen.name.clone(),
        param: p.name.clone(),
        text: text.into(),
        ty: p.ty.clone(),
    };
    Ok(match p.ty.as_str() {
        "float" => Value::Float(
            text.parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(bad)?,
        ),
        "int" => Value::Int(text.parse().map_err(|_| bad())?),
        "unsigned" => Value::Uint(text.parse().map_err(|_| bad())?),
        other => {
            return Err(KernelError::ParameterType {
                kernel: chosen.name.clone(),
                file: file.into(),
                param: p.name.clone(),
                ty: other.into(),
            })
        }
    })
}

fn read_source(path: &Path) -> Result<String, KernelError> {
    let file = path.display().to_string();
    let unreadable = |source| KernelError::Unreadable {
        file: file.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(KernelError::NotRegular(file));
    }
    if meta.len() > MAX_SOURCE {
        return Err(KernelError::TooLarge {
            file,
            len: meta.len(),
        });
    }
    // Read at most the limit: a file's size may lie (`/proc` files say 0 and never end).
    // Whole 64 KiB reads (files such as /proc/self/pagemap refuse reads of odd sizes).
    let mut bytes = Vec::new();
    {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(unreadable)?;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = match f.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(unreadable(e)),
            };
            bytes.extend_from_slice(&chunk[..n]);
            if bytes.len() as u64 > MAX_SOURCE {
                return Err(KernelError::ReadTooLarge(file));
            }
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| KernelError::NotUtf8(file.clone()))?;
    if text.contains('\0') {
        return Err(KernelError::Nul(file));
    }
    Ok(text)
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A `__global__` function found in a source.
#[derive(Debug, PartialEq)]
struct Found {
    name: String,
    extern_c: bool,
    params: Vec<Param>,
}

#[derive(Debug, PartialEq)]
struct Param {
    /// Normalised: `fp_band`, `float`, `int`, `unsigned`, or the type as written.
    ty: String,
    name: String,
}

/// The source without comments (each replaced by a space; newlines kept) and string literals'
/// contents (so that a quoted `__global__` is not taken for one).
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
            out.push(' ');
        } else {
            let c = src[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The `__global__` functions of `src` (also those declared with `FP_KERNEL`).
fn scan(src: &str) -> Vec<Found> {
    let text = strip_comments(src);
    let words = tokens(&text);
    let mut found = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let (extern_c, rest) = match w.as_str() {
            "FP_KERNEL" => (true, i + 1),
            "__global__" => {
                let before: Vec<&str> = words[..i]
                    .iter()
                    .rev()
                    .take(2)
                    .map(|s| s.as_str())
                    .collect();
                (before == ["\"C\"", "extern"], i + 1)
            }
            _ => continue,
        };
        // Skip `void`, `__launch_bounds__(…)` and the like up to `NAME (`, never past the
        // end of the declaration (so the scan stays linear on any file).
        let mut j = rest;
        while j + 1 < words.len() && !ends_declaration(&words[j]) {
            if words[j] == "__launch_bounds__" && words[j + 1] == "(" {
                j = close(&words, j + 1) + 1;
                continue;
            }
            if is_identifier(&words[j]) && words[j + 1] == "(" {
                break;
            }
            j += 1;
        }
        if j + 1 >= words.len() || ends_declaration(&words[j]) {
            continue;
        }
        let name = words[j].clone();
        let end = close(&words, j + 1);
        let params = split_params(&words[j + 2..end.min(words.len())]);
        found.push(Found {
            name,
            extern_c,
            params,
        });
    }
    found
}

/// Whether `w` can't be inside a declaration's head: where a scan for one stops.
fn ends_declaration(w: &str) -> bool {
    matches!(w, ";" | "{" | "}" | "__global__" | "FP_KERNEL")
}

/// The index of the `)` matching the `(` at `open`, or of the word that ends the
/// declaration first (an unclosed list).
fn close(words: &[String], open: usize) -> usize {
    let mut depth = 0;
    for (k, w) in words.iter().enumerate().skip(open) {
        match w.as_str() {
            w if ends_declaration(w) => return k,
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    words.len()
}

fn split_params(words: &[String]) -> Vec<Param> {
    let mut params = Vec::new();
    for part in words.split(|w| w == ",") {
        let part: Vec<&str> = part
            .iter()
            .map(|s| s.as_str())
            .filter(|w| !matches!(*w, "const" | "__restrict__" | "volatile"))
            .collect();
        let Some((name, ty)) = part.split_last() else {
            continue;
        };
        if ty.is_empty() || (ty == ["void"]) {
            continue;
        }
        let ty = match ty.join(" ").as_str() {
            "float" => "float".to_string(),
            "int" | "signed" | "signed int" | "int32_t" => "int".to_string(),
            "unsigned" | "unsigned int" | "uint32_t" | "u32" => "unsigned".to_string(),
            other => other.to_string(),
        };
        params.push(Param {
            ty,
            name: name.to_string(),
        });
    }
    params
}

/// Identifiers, string literals and single punctuation characters.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(text[i..end].to_string());
        } else if c == '"' {
            let mut end = text.len();
            for (j, d) in chars.by_ref() {
                if d == '"' {
                    end = j + 1;
                    break;
                }
            }
            out.push(text[i..end].to_string());
        } else {
            out.push(c.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDGES: &str = r#"
#include "framepipe.cuh"
// __global__ void commented_out(fp_band b) {}
/* extern "C" __global__ void also_not(fp_band b) */
FP_KERNEL edges(fp_band band, float strength, int mode) { }
extern "C" __global__ void __launch_bounds__(256) second(const fp_band band) { }
__global__ void mangled(fp_band band) { }
extern "C" __global__ void wrong_first(float x) { }
extern "C" __global__ void odd_type(fp_band band, double d) { }
"#;

    fn spec(given: &[(&str, &str)], function: Option<&str>) -> Spec {
        Spec {
            path: "edges.cu".into(),
            function: function.map(str::to_string),
            radius: 1,
            given: given
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn bind(given: &[(&str, &str)], function: Option<&str>) -> Result<UserKernel, KernelError> {
        UserKernel::bind(spec(given, function), EDGES.into())
    }

    #[test]
    fn finds_global_functions_and_their_parameters() {
        let found = scan(EDGES);
        let names: Vec<&str> = found.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(
            names,
            ["edges", "second", "mangled", "wrong_first", "odd_type"]
        );
        assert_eq!(
            found[0].params,
            [
                Param {
                    ty: "fp_band".into(),
                    name: "band".into()
                },
                Param {
                    ty: "float".into(),
                    name: "strength".into()
                },
                Param {
                    ty: "int".into(),
                    name: "mode".into()
                },
            ]
        );
        assert!(found[0].extern_c && found[1].extern_c && !found[2].extern_c);
        assert_eq!(found[1].params[0].ty, "fp_band");
    }

    #[test]
    fn binds_parameters_by_name_and_type() {
        let k = bind(&[("mode", "3"), ("strength", "0.5")], Some("edges")).unwrap();
        assert_eq!(
            k.args,
            [
                ("strength".to_string(), Value::Float(0.5)),
                ("mode".to_string(), Value::Int(3))
            ]
        );
        assert_eq!(
            k.to_string(),
            "kernel:edges.cu,fn=edges,radius=1,strength=0.5,mode=3"
        );
        assert!(bind(&[], Some("second")).is_ok());
    }

    #[test]
    fn says_what_is_wrong() {
        for (given, function, says) in [
            (vec![], None, "several __global__ functions"),
            (
                vec![],
                Some("nope"),
                "has no __global__ function 'nope' (it has: edges, second",
            ),
            (vec![("mode", "1")], Some("edges"), "needs strength=<float>"),
            (
                vec![("strength", "x"), ("mode", "1")],
                Some("edges"),
                "strength=x is not a valid float",
            ),
            (
                vec![("strength", "1"), ("mode", "1.5")],
                Some("edges"),
                "mode=1.5 is not a valid int",
            ),
            (
                vec![("strength", "1"), ("mode", "1"), ("gain", "2")],
                Some("edges"),
                "has no parameter 'gain' (its parameters: strength, mode)",
            ),
            (vec![], Some("mangled"), "must be declared extern \"C\""),
            (
                vec![],
                Some("wrong_first"),
                "first parameter must be `fp_band band`",
            ),
            (vec![("d", "1")], Some("odd_type"), "has type 'double'"),
        ] {
            let err = bind(&given, function).unwrap_err().to_string();
            assert!(err.contains(says), "{given:?} {function:?}: {err}");
        }
    }

    #[test]
    fn parses_settings() {
        let err = UserKernel::parse("missing-file.cu", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("kernel file 'missing-file.cu'"), "{err}");
        for (settings, says) in [
            (vec!["radius=-1"], "radius '-1' must be a whole number"),
            (vec!["radius=256"], "from 0 to 255"),
            (vec!["3"], "expected name=value"),
            (vec!["a=1", "a=2"], "given twice"),
            (vec!["1a=2"], "not a parameter name"),
        ] {
            let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
            let err = UserKernel::parse("x.cu", &settings)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{settings:?}: {err}");
        }
    }

    #[test]
    fn hostile_files_are_read_and_scanned_in_bounded_time() {
        // A file whose size says 0 and that never ends is read only up to the limit.
        let t = std::time::Instant::now();
        let err = read_source(Path::new("/proc/self/pagemap"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than"), "{err}");
        // 90 000 declarations that never name a function: linear, not quadratic.
        let hostile = "__global__ ".repeat(90_000);
        assert!(scan(&hostile).is_empty());
        let unclosed = "__global__ void f(".repeat(50_000);
        assert_eq!(scan(&unclosed).len(), 50_000);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
        // Thousands of kernels are named ten at a time.
        let many: String = (0..5000)
            .map(|i| format!("FP_KERNEL k{i}(fp_band band) {{}}\n"))
            .collect();
        let err = UserKernel::bind(spec(&[], None), many.into())
            .unwrap_err()
            .to_string();
        assert!(err.contains("and 4990 more") && err.len() < 400, "{err}");
    }
}
