//! Derived files a state machine keeps beside its snapshots (`<name>.<gen>`), framed so a
//! damaged, cut or stale one is recognised and never used.
//!
//! Frame = header `[8 magic]["u32 LE version"]["u64 LE generation"]["u64 LE payload length"]
//! ["u32 LE crc32 of payload"]`, then the payload; the generation is the snapshot whose state
//! the payload reflects. Owns writing such a file durably (temp file, fsync, rename, directory
//! fsync) and reading one back with every check. Must never interpret the payload: the machine
//! owns its meaning and must rebuild it from the snapshot whenever `read` refuses.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::files;

const HEADER_LEN: usize = 32;

/// What a side file must declare to be used.
#[derive(Debug, Clone, Copy)]
pub struct SideKind {
    pub magic: [u8; 8],
    pub version: u32,
}

/// Writes `payload` to `path` atomically and durably, for snapshot `generation`. On error the
/// previous file at `path` (if any) is untouched and no temp file is left behind.
pub fn write(path: &Path, kind: SideKind, generation: u64, payload: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::other(format!("bad side file name {}", path.display())))?;
    let temp = dir.join(files::temp_name(name));
    let result = (|| {
        let mut file = files::create_private_file(&temp)?;
        file.write_all(&header(kind, generation, payload))?;
        file.write_all(payload)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        files::sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

fn header(kind: SideKind, generation: u64, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&kind.magic);
    h[8..12].copy_from_slice(&kind.version.to_le_bytes());
    h[12..20].copy_from_slice(&generation.to_le_bytes());
    h[20..28].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    h[28..32].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    h
}

/// The files `<prefix><generation><suffix>` in `dir` with their generation, newest first
/// (what each derived index keeps beside the snapshots).
pub fn generations(dir: &Path, prefix: &str, suffix: &str) -> Vec<(u64, std::path::PathBuf)> {
    let mut found: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let g = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
            Some((g.parse().ok()?, e.path()))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found
}

/// The payload of `path` if it is a complete, intact `kind` file for exactly `generation`;
/// otherwise why not (missing, cut short, bad magic or version, another generation, checksum).
pub fn read(path: &Path, kind: SideKind, generation: u64) -> Result<Vec<u8>, String> {
    let mut bytes = fs::read(path).map_err(|e| e.to_string())?;
    if bytes.len() < HEADER_LEN {
        return Err(format!("{} bytes, shorter than the header", bytes.len()));
    }
    if bytes[..8] != kind.magic {
        return Err("bad magic".to_owned());
    }
    let field = |r: std::ops::Range<usize>| {
        bytes[r]
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    };
    let version = field(8..12);
    if version != u64::from(kind.version) {
        return Err(format!(
            "format version {version}, this build reads {}",
            kind.version
        ));
    }
    let found = field(12..20);
    if found != generation {
        return Err(format!(
            "made for snapshot {found}, the state is snapshot {generation} (stale)"
        ));
    }
    let declared = field(20..28);
    let actual = (bytes.len() - HEADER_LEN) as u64;
    if declared != actual {
        return Err(format!(
            "payload is {actual} bytes, header says {declared} (cut short?)"
        ));
    }
    if crc32fast::hash(&bytes[HEADER_LEN..]) as u64 != field(28..32) {
        return Err("checksum mismatch".to_owned());
    }
    bytes.drain(..HEADER_LEN);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: SideKind = SideKind {
        magic: *b"MEMDTEST",
        version: 3,
    };

    #[test]
    fn round_trips_and_refuses_every_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("side.00000007");
        write(&path, KIND, 7, b"derived bytes").unwrap();
        assert_eq!(read(&path, KIND, 7).unwrap(), b"derived bytes");
        assert!(read(&path, KIND, 8).unwrap_err().contains("stale"));
        let other = SideKind { version: 4, ..KIND };
        assert!(read(&path, other, 7).is_err());
        let good = fs::read(&path).unwrap();
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            fs::write(&path, &bad).unwrap();
            assert!(read(&path, KIND, 7).is_err(), "flip at {at} accepted");
        }
        for cut in 0..good.len() {
            fs::write(&path, &good[..cut]).unwrap();
            assert!(read(&path, KIND, 7).is_err(), "cut at {cut} accepted");
        }
        assert!(read(&dir.path().join("missing"), KIND, 7).is_err());
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("side.00000001");
        write(&path, KIND, 1, b"old").unwrap();
        assert!(write(&dir.path().join("no/such/dir/side"), KIND, 2, b"x").is_err());
        assert_eq!(read(&path, KIND, 1).unwrap(), b"old");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temp file left");
    }
}
