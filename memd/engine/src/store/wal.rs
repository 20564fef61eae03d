//! The write-ahead log: segment files of checksummed frames.
//!
//! Segment `wal.<gen>` = header `[8 magic]["u32 LE version"]["u64 LE generation"]`, then frames
//! `[u32 LE payload length][u32 LE crc32 of payload][payload]`, one frame per commit request
//! (the MessagePack encoding of its ops). Owns appending (write, one fsync, roll back on failure)
//! and reading frames back. Must never leave a partial frame behind a failed append when it can
//! cut it off, never report an append durable before `sync_data` succeeded, and never retry an
//! fsync that failed (the kernel may have dropped the dirty pages; only a rollback is safe).

use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::StoreError;
#[cfg(test)]
use super::error::os_code;
use super::files;

const MAGIC: [u8; 8] = *b"MEMDWAL\0";
const VERSION: u32 = 1;
pub(crate) const HEADER_LEN: u64 = 20;
pub(crate) const FRAME_HEADER_LEN: u64 = 8;
/// Larger declared lengths are treated as corruption rather than allocated.
pub(crate) const MAX_FRAME_PAYLOAD: u32 = 256 << 20;

/// One commit request's ops as a complete frame.
pub(crate) fn encode_frame<T: Serialize + ?Sized>(ops: &T) -> Result<Vec<u8>, StoreError> {
    // Named fields, so ops written today still decode after fields are added with defaults.
    let payload =
        rmp_serde::to_vec_named(ops).map_err(|e| StoreError::Encode(format!("WAL op: {e}")))?;
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|len| *len <= MAX_FRAME_PAYLOAD)
        .ok_or_else(|| {
            StoreError::Encode(format!(
                "commit of {} bytes exceeds the {MAX_FRAME_PAYLOAD}-byte frame limit",
                payload.len()
            ))
        })?;
    let mut frame = Vec::with_capacity(payload.len() + FRAME_HEADER_LEN as usize);
    frame.extend_from_slice(&len.to_le_bytes());
    frame.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

fn segment_header(generation: u64) -> [u8; HEADER_LEN as usize] {
    let mut header = [0u8; HEADER_LEN as usize];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[12..].copy_from_slice(&generation.to_le_bytes());
    header
}

/// Checks a segment's header against the generation its name claims.
pub(crate) fn check_header(bytes: &[u8], generation: u64) -> Result<(), String> {
    if bytes.len() < HEADER_LEN as usize {
        return Err(format!(
            "header is {} bytes, expected {HEADER_LEN}",
            bytes.len()
        ));
    }
    if bytes[..8] != MAGIC {
        return Err("not a memd WAL segment (bad magic)".to_owned());
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != VERSION {
        return Err(format!(
            "WAL format version {version} is not supported (this build reads {VERSION})"
        ));
    }
    let mut gen_bytes = [0u8; 8];
    gen_bytes.copy_from_slice(&bytes[12..20]);
    let found = u64::from_le_bytes(gen_bytes);
    if found != generation {
        return Err(format!(
            "header says generation {found}, file name says {generation}"
        ));
    }
    Ok(())
}

/// Test-only failure injection: how many upcoming operations fail.
#[cfg(test)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Faults {
    /// Group appends that write half their first frame, then fail with ENOSPC.
    pub write_enospc: u32,
    /// Group appends whose fsync fails with EIO (after the frames were written).
    pub sync_eio: u32,
    /// Rollbacks (truncate + fsync) that fail with EIO.
    pub rollback_eio: u32,
}

/// The open, active segment that commits append to.
pub(crate) struct WalWriter {
    file: File,
    generation: u64,
    /// End of the last durable frame; the next append starts here.
    len: u64,
    /// Set when a failed append could not be rolled back: the tail is unknown.
    poisoned: Option<String>,
    #[cfg(test)]
    pub faults: Faults,
}

impl WalWriter {
    /// Creates segment `generation` with its header, atomically (temp file + rename), so a
    /// crash never leaves a segment without a complete header.
    pub(crate) fn create(dir: &Path, generation: u64) -> io::Result<WalWriter> {
        let final_path = dir.join(files::wal_name(generation));
        if final_path.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("refusing to overwrite {}", final_path.display()),
            ));
        }
        let temp_path = dir.join(files::temp_name(&files::wal_name(generation)));
        let mut file = files::create_private_file(&temp_path)?;
        file.write_all(&segment_header(generation))?;
        file.sync_all()?;
        std::fs::rename(&temp_path, &final_path)?;
        files::sync_dir(dir)?;
        Ok(WalWriter::resume(file, generation, HEADER_LEN))
    }

    /// Continues an existing segment whose valid content ends at `len`.
    pub(crate) fn resume(file: File, generation: u64, len: u64) -> WalWriter {
        WalWriter {
            file,
            generation,
            len,
            poisoned: None,
            #[cfg(test)]
            faults: Faults::default(),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends the frames and makes them durable with one fsync. On failure the segment is cut
    /// back to where it was, so none of these frames can be replayed later.
    pub(crate) fn append_durably(&mut self, frames: &[&[u8]]) -> Result<(), StoreError> {
        if let Some(reason) = &self.poisoned {
            return Err(StoreError::ReadOnly(format!(
                "the WAL is in an unknown state after an earlier failure ({reason}); \
                 restart memd to recover"
            )));
        }
        self.refuse_if_unlinked()?;
        let start = self.len;
        match self.write_and_sync(frames) {
            // Deleted between the check and the fsync: the frames are in a file nobody will
            // ever read, so they are not durable and must not be acknowledged.
            Ok(_) if self.unlinked() => self.refuse_if_unlinked(),
            Ok(end) => {
                self.len = end;
                Ok(())
            }
            Err(err) => {
                self.roll_back(start);
                Err(StoreError::from_io("appending to the WAL", err))
            }
        }
    }

    /// The segment was unlinked (the data dir deleted under the running daemon): appends would
    /// land in a file that vanishes at exit. Refuses writes from then on (HTTP 503).
    fn refuse_if_unlinked(&mut self) -> Result<(), StoreError> {
        if !self.unlinked() {
            return Ok(());
        }
        let reason = format!(
            "wal.{} was deleted while memd was running (was the data dir removed?); \
             restart memd to start over in a new data dir",
            self.generation
        );
        if self.poisoned.is_none() {
            tracing::error!("store: {reason}; refusing further writes");
            self.poisoned = Some(reason.clone());
        }
        Err(StoreError::ReadOnly(reason))
    }

    #[cfg(unix)]
    fn unlinked(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        // An fstat: about a microsecond beside the fsync every append pays anyway.
        self.file.metadata().is_ok_and(|m| m.nlink() == 0)
    }

    /// Windows deletes a file that is open (std opens with `FILE_SHARE_DELETE`) either at once
    /// (POSIX semantics: no links left) or when the last handle closes (delete pending).
    #[cfg(windows)]
    fn unlinked(&self) -> bool {
        use std::os::windows::io::AsRawHandle;
        use windows_sys::Win32::Storage::FileSystem::{
            FILE_STANDARD_INFO, FileStandardInfo, GetFileInformationByHandleEx,
        };
        // SAFETY: FILE_STANDARD_INFO is plain data; all zeroes is a valid value.
        let mut info: FILE_STANDARD_INFO = unsafe { std::mem::zeroed() };
        // SAFETY: a live handle owned by `self.file`, and a buffer of exactly the size passed.
        let ok = unsafe {
            GetFileInformationByHandleEx(
                self.file.as_raw_handle(),
                FileStandardInfo,
                (&raw mut info).cast(),
                size_of::<FILE_STANDARD_INFO>() as u32,
            )
        };
        ok != 0 && (info.NumberOfLinks == 0 || info.DeletePending)
    }

    fn write_and_sync(&mut self, frames: &[&[u8]]) -> io::Result<u64> {
        #[cfg(test)]
        if take(&mut self.faults.write_enospc) {
            let half = frames.first().map_or(&[][..], |f| &f[..f.len() / 2]);
            files::write_all_at(&self.file, half, self.len)?;
            return Err(io::Error::from_raw_os_error(os_code::FULL[0]));
        }
        let mut offset = self.len;
        for frame in frames {
            files::write_all_at(&self.file, frame, offset)?;
            offset += frame.len() as u64;
        }
        #[cfg(test)]
        if take(&mut self.faults.sync_eio) {
            return Err(io::Error::from_raw_os_error(os_code::IO));
        }
        self.file.sync_data()?;
        Ok(offset)
    }

    fn roll_back(&mut self, start: u64) {
        if let Err(err) = self.truncate_durably(start) {
            let reason = format!(
                "could not cut wal.{} back to {start} bytes: {err}",
                self.generation
            );
            tracing::error!("store: {reason}; refusing further writes until restart");
            self.poisoned = Some(reason);
        }
    }

    fn truncate_durably(&mut self, len: u64) -> io::Result<()> {
        #[cfg(test)]
        if take(&mut self.faults.rollback_eio) {
            return Err(io::Error::from_raw_os_error(os_code::IO));
        }
        self.file.set_len(len)?;
        self.file.sync_all()
    }
}

#[cfg(test)]
fn take(counter: &mut u32) -> bool {
    let armed = *counter > 0;
    *counter = counter.saturating_sub(1);
    armed
}

/// What the next position of a segment holds.
#[derive(Debug)]
pub(crate) enum FrameRead {
    Frame(Vec<u8>),
    /// Clean end of the segment.
    End,
    /// The frame runs past the end of the file: an append interrupted by a crash.
    Torn(String),
    /// A complete frame that fails its checks.
    Corrupt(String),
}

/// The payload of the complete, checksum-valid frame at the start of `bytes` and the frame's
/// whole length; `None` when there is none there (resynchronisation tries every offset).
pub(crate) fn frame_at(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let head = bytes.get(..FRAME_HEADER_LEN as usize)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len == 0 || len > MAX_FRAME_PAYLOAD {
        return None;
    }
    let end = FRAME_HEADER_LEN as usize + len as usize;
    let payload = bytes.get(FRAME_HEADER_LEN as usize..end)?;
    (crc32fast::hash(payload) == crc).then_some((payload, end))
}

/// Sequential reader of one segment's frames.
pub(crate) struct SegmentReader {
    reader: BufReader<File>,
    path: PathBuf,
    /// Start of the next frame.
    offset: u64,
    file_len: u64,
}

impl SegmentReader {
    /// Opens a segment and validates its header. A bad header is an error, never a torn tail:
    /// segments are published with a complete header.
    pub(crate) fn open(path: &Path, generation: u64) -> Result<SegmentReader, StoreError> {
        let read_err = |e| StoreError::from_io(&format!("reading {}", path.display()), e);
        let file = File::open(path).map_err(read_err)?;
        let file_len = file.metadata().map_err(read_err)?.len();
        let mut reader = BufReader::with_capacity(1 << 20, file);
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        (&mut reader)
            .take(HEADER_LEN)
            .read_to_end(&mut header)
            .map_err(read_err)?;
        check_header(&header, generation)
            .map_err(|why| StoreError::Corrupt(format!("{}: {why}", path.display())))?;
        Ok(SegmentReader {
            reader,
            path: path.to_path_buf(),
            offset: HEADER_LEN,
            file_len,
        })
    }

    /// Where the next frame starts (after the last one returned).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    pub(crate) fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Reads the next frame. I/O errors are returned as errors, not as damage: a read failure
    /// says nothing about the data and must not cause it to be cut off.
    pub(crate) fn next_frame(&mut self) -> Result<FrameRead, StoreError> {
        let remaining = self.file_len - self.offset;
        if remaining == 0 {
            return Ok(FrameRead::End);
        }
        if remaining < FRAME_HEADER_LEN {
            return Ok(FrameRead::Torn(format!(
                "{remaining} bytes, too short for a frame header"
            )));
        }
        let mut head = [0u8; FRAME_HEADER_LEN as usize];
        self.read_exact(&mut head)?;
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if len == 0 {
            return Ok(FrameRead::Corrupt("zero-length frame".to_owned()));
        }
        if len > MAX_FRAME_PAYLOAD {
            return Ok(FrameRead::Corrupt(format!(
                "implausible frame length {len}"
            )));
        }
        if u64::from(len) > remaining - FRAME_HEADER_LEN {
            return Ok(FrameRead::Torn(format!(
                "frame of {len} bytes runs past the end of the file ({} bytes left)",
                remaining - FRAME_HEADER_LEN
            )));
        }
        let mut payload = vec![0u8; len as usize];
        self.read_exact(&mut payload)?;
        if crc32fast::hash(&payload) != crc {
            return Ok(FrameRead::Corrupt("checksum mismatch".to_owned()));
        }
        self.offset += FRAME_HEADER_LEN + u64::from(len);
        Ok(FrameRead::Frame(payload))
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), StoreError> {
        self.reader
            .read_exact(buf)
            .map_err(|e| StoreError::from_io(&format!("reading {}", self.path.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames_of(dir: &Path, generation: u64) -> Vec<FrameRead> {
        let path = dir.join(files::wal_name(generation));
        let mut reader = SegmentReader::open(&path, generation).unwrap();
        let mut out = Vec::new();
        loop {
            let next = reader.next_frame().unwrap();
            let stop = !matches!(next, FrameRead::Frame(_));
            out.push(next);
            if stop {
                return out;
            }
        }
    }

    #[test]
    fn frames_round_trip_through_a_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = WalWriter::create(dir.path(), 7).unwrap();
        let a = encode_frame(&["a".to_owned()]).unwrap();
        let b = encode_frame(&["b".to_owned(), "c".to_owned()]).unwrap();
        wal.append_durably(&[&a, &b]).unwrap();
        let read = frames_of(dir.path(), 7);
        assert_eq!(read.len(), 3);
        let FrameRead::Frame(second) = &read[1] else {
            panic!("expected a frame, got {:?}", read[1]);
        };
        let ops: Vec<String> = rmp_serde::from_slice(second).unwrap();
        assert_eq!(ops, ["b", "c"]);
        assert!(matches!(read[2], FrameRead::End));
    }

    #[test]
    fn header_must_match_the_file_name() {
        let header = segment_header(5);
        assert!(check_header(&header, 5).is_ok());
        assert!(
            check_header(&header, 6)
                .unwrap_err()
                .contains("generation 5")
        );
        assert!(check_header(&header[..10], 5).is_err());
        let mut other = header;
        other[0] = b'X';
        assert!(check_header(&other, 5).unwrap_err().contains("magic"));
    }

    #[test]
    fn failed_append_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = WalWriter::create(dir.path(), 0).unwrap();
        let frame = encode_frame(&["x".to_owned()]).unwrap();
        wal.append_durably(&[&frame]).unwrap();
        let good = wal.len();
        wal.faults.write_enospc = 1;
        let err = wal.append_durably(&[&frame]).unwrap_err();
        assert!(err.is_storage_full(), "{err}");
        let path = dir.path().join(files::wal_name(0));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        wal.faults.sync_eio = 1;
        let err = wal.append_durably(&[&frame, &frame]).unwrap_err();
        assert!(matches!(err, StoreError::Io(_)), "{err}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
        wal.append_durably(&[&frame]).unwrap();
        assert_eq!(wal.len(), good + frame.len() as u64);
    }

    #[test]
    fn failed_rollback_refuses_later_appends() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = WalWriter::create(dir.path(), 0).unwrap();
        let frame = encode_frame(&["x".to_owned()]).unwrap();
        wal.faults.sync_eio = 1;
        wal.faults.rollback_eio = 1;
        assert!(wal.append_durably(&[&frame]).is_err());
        let err = wal.append_durably(&[&frame]).unwrap_err();
        assert!(err.is_read_only(), "{err}");
    }
}
