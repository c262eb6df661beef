//! File-name checks shared by `--input`, `--output`, `--trace` and `--timeline`.

use std::path::Path;

/// The extension of `path`, lower-cased; empty when there is none.
pub fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default()
}

/// Fails with "`flag` 'path': folder '…' does not exist" when `path`'s folder is missing.
pub fn check_folder(flag: &str, path: &str) -> Result<(), String> {
    match Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        Some(dir) if !dir.is_dir() => Err(format!(
            "{flag} '{path}': folder '{}' does not exist",
            dir.display()
        )),
        _ => Ok(()),
    }
}
