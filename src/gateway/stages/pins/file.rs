//! The pins file on disk: read when it changed (by modification time and length, so replicas
//! sharing it follow each other), written atomically (a temporary file in the same folder,
//! renamed over the old one: a reader sees the old file or the new one, never half of one).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::config::pins::PinsFile;

/// What the file looked like when last read or written.
pub(super) type Stamp = Option<(SystemTime, u64)>;

pub(super) fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The file again when it changed since `last` (`Ok(None)`: unchanged).
pub(super) fn read_if_changed(
    path: &Path,
    last: Stamp,
) -> Result<Option<(PinsFile, Stamp)>, String> {
    let now = stamp(path);
    if now == last && now.is_some() {
        return Ok(None);
    }
    let file = PinsFile::read(path)?;
    Ok(Some((file, now)))
}

/// Write `file` to `path` atomically; the new stamp.
pub(super) fn write(path: &Path, file: &PinsFile) -> Result<Stamp, String> {
    let mut text = serde_json::to_string_pretty(file).expect("pins serialize");
    text.push('\n');
    let tmp = temp_path(path);
    let fail = |e: std::io::Error| format!("pins.file: cannot write {}: {e}", path.display());
    std::fs::write(&tmp, text).map_err(fail)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(stamp(path))
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::pins::{Pin, PoolPins, PINS_FILE_VERSION};

    #[test]
    fn written_atomically_and_read_back_only_when_changed() {
        let dir = scratch("file");
        let path = dir.join("pins.json");
        // No file yet: empty, and read again next time (it may appear).
        let (empty, s0) = read_if_changed(&path, None).unwrap().unwrap();
        assert!(empty.pools.is_empty() && s0.is_none());
        let mut f = PinsFile {
            version: PINS_FILE_VERSION,
            ..Default::default()
        };
        let pin = Pin {
            digest: "sha256:00".into(),
            definition: serde_json::json!({"description": "d"}),
            approved: "2026-12-03T13:00:00Z".into(),
            by: "admin".into(),
        };
        let mut pool = PoolPins::default();
        pool.tools.insert("add".into(), pin);
        f.pools.insert("ts".into(), pool);
        let s1 = write(&path, &f).unwrap();
        assert!(s1.is_some());
        assert!(read_if_changed(&path, s1).unwrap().is_none());
        let (back, _) = read_if_changed(&path, None).unwrap().unwrap();
        assert_eq!(back, f);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 1);
        // A broken file is an error naming it and the line, never a crash.
        std::fs::write(&path, "{\"version\": 1,\n \"pools\": [}").unwrap();
        let err = read_if_changed(&path, s1).unwrap_err();
        assert!(err.contains("pins.json line 2"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh folder of this process for one test.
    pub(crate) fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mcp-edge-pins-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
