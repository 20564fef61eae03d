//! Text extraction under hard limits: PDFs are read in a child `memd` process that cannot take
//! more than [`MEMORY_LIMIT`] of memory or [`CPU_SECONDS`] of CPU.
//!
//! Owns the parent side (spawn the running `memd` with [`CHILD_ARG`], feed it the file, read
//! at most [`TEXT_MAX`] of text, kill it after [`WALL`]) and the child side ([`child_main`]:
//! set the limits on itself, then `ingest::extract_text`). A PDF's streams are compressed: a
//! 177 KB file took the in-process parser to 1.67 GB and a 711 KB one aborted the whole process
//! (issue 17). Must never run a PDF parser in the CLI's or the daemon's own process, and never
//! wait on the child without a deadline. Plain text and Markdown need no child: their text is
//! their bytes, bounded by `ingest::MAX_BYTES`.
//!
//! Unix limits the child with rlimits (address space, CPU seconds, no core dump). Windows has
//! none: the child puts itself in a Job Object that caps its committed memory at
//! [`MEMORY_LIMIT`] and its user-mode CPU time at [`CPU_SECONDS`] (Windows ends it past either)
//! before it reads anything; if Windows refuses the job, the child refuses the file. Wine
//! accepts those limits without enforcing them: there only the parent's [`WALL`] deadline holds.

use crate::ops::ingest::{self, IngestError};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// The hidden first argument that makes `memd` the extraction child.
pub const CHILD_ARG: &str = "__extract-text";
/// Address space the child may use. The PDFs of the ingest tests need under 100 MB; a
/// decompression bomb hits this and dies alone.
pub const MEMORY_LIMIT: u64 = 1 << 30;
/// CPU seconds the child may use (the kernel stops it after that).
pub const CPU_SECONDS: u64 = 60;
/// How long the parent waits for the child's answer before killing it.
pub const WALL: Duration = Duration::from_secs(90);
/// The most text one file may yield (a 10 MB PDF of plain text yields about as much).
pub const TEXT_MAX: usize = 64 * 1024 * 1024;
/// The child's exit code for "the file was read and refused" (its message is on stderr).
const REFUSED: u8 = 2;

/// Plain text of an uploaded file; PDFs are parsed by a confined child process.
pub fn extract_text(file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    let is_pdf = Path::new(file_name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pdf"));
    if !is_pdf || bytes.len() > ingest::MAX_BYTES {
        return ingest::extract_text(file_name, bytes);
    }
    let exe = std::env::current_exe()
        .map_err(|e| IngestError::Pdf(format!("cannot start the PDF reader: {e}")))?;
    in_child(&exe, file_name, bytes)
}

fn in_child(exe: &Path, file_name: &str, bytes: &[u8]) -> Result<String, IngestError> {
    let failed = |what: &str, e: std::io::Error| IngestError::Pdf(format!("{what}: {e}"));
    let mut child = Command::new(exe)
        .arg(CHILD_ARG)
        .arg(file_name)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed("cannot start the PDF reader", e))?;
    let pid = child.id();
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(IngestError::Pdf("cannot talk to the PDF reader".into()));
    };
    let input = bytes.to_vec();
    // Feeding, reading and waiting each on a thread of its own: a child that stops reading
    // its input or floods its output cannot block the parent past the deadline.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let text = std::thread::spawn(move || read_at_most(stdout, TEXT_MAX + 1));
    let message = std::thread::spawn(move || read_at_most(stderr, 4096));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(WALL) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(failed("the PDF reader was lost", e)),
        Err(_) => {
            kill(pid);
            return Err(too_costly());
        }
    };
    let text = text.join().unwrap_or_default();
    let message = message.join().unwrap_or_default();
    match status.code() {
        Some(0) if text.len() > TEXT_MAX => Err(IngestError::Pdf(format!(
            "the PDF holds more than {} MB of text",
            TEXT_MAX >> 20
        ))),
        Some(0) => String::from_utf8(text)
            .map_err(|_| IngestError::Pdf("the PDF reader answered garbage".into())),
        Some(c) if c == i32::from(REFUSED) => Err(IngestError::Pdf(
            String::from_utf8_lossy(&message).trim().to_string(),
        )),
        // Killed by a limit (SIGKILL, SIGXCPU) or aborted on a failed allocation.
        _ => Err(too_costly()),
    }
}

/// Kills the child `pid`, which the waiting thread has not reaped (Unix) or whose handle it
/// still holds (Windows): either way the pid cannot have been reused.
#[cfg(unix)]
fn kill(pid: u32) {
    // SAFETY: kill(2) on the pid of a live or zombie child of this process.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
}

#[cfg(windows)]
fn kill(pid: u32) {
    use windows_sys::Win32::Foundation::CloseHandle;
    use windows_sys::Win32::System::Threading::{OpenProcess, PROCESS_TERMINATE, TerminateProcess};
    // SAFETY: OpenProcess returns a handle we own (or null); it is closed once used.
    unsafe {
        let handle = OpenProcess(PROCESS_TERMINATE, 0, pid);
        if !handle.is_null() {
            TerminateProcess(handle, 1);
            CloseHandle(handle);
        }
    }
}

fn too_costly() -> IngestError {
    IngestError::Pdf(format!(
        "reading this PDF needs more than {} MB of memory or {} s (a compression bomb?); \
         memd refuses it",
        MEMORY_LIMIT >> 20,
        CPU_SECONDS
    ))
}

fn read_at_most(from: impl Read, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = from.take(limit as u64).read_to_end(&mut out);
    out
}

/// `memd __extract-text <file name>`: the file on stdin, its text on stdout; a refusal's
/// message on stderr with exit code 2. Limits are set before anything is read.
pub fn child_main() -> ExitCode {
    if let Err(e) = limit_self() {
        eprintln!("cannot limit the PDF reader: {e}");
        return ExitCode::from(REFUSED);
    }
    let name = std::env::args().nth(2).unwrap_or_default();
    let bytes = read_at_most(std::io::stdin().lock(), ingest::MAX_BYTES + 1);
    match ingest::extract_text(&name, &bytes) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(REFUSED)
        }
    }
}

#[cfg(unix)]
fn limit_self() -> std::io::Result<()> {
    for (resource, value) in [
        (libc::RLIMIT_AS, MEMORY_LIMIT),
        (libc::RLIMIT_CPU, CPU_SECONDS),
        // A crash of the reader must not leave a core dump of the user's document.
        (libc::RLIMIT_CORE, 0),
    ] {
        let limit = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: setrlimit(2) with a valid resource and a pointer to a live struct.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Puts this process in a new Job Object with the memory and CPU limits. The job's handle is
/// left open on purpose: the job (and its limits) lasts as long as this process.
#[cfg(windows)]
fn limit_self() -> std::io::Result<()> {
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION,
        JOB_OBJECT_LIMIT_PROCESS_MEMORY, JOB_OBJECT_LIMIT_PROCESS_TIME,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject,
    };
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    let failed = || Err(std::io::Error::last_os_error());
    // SAFETY: the structure is plain data (all zeroes is valid); every pointer passed points
    // to a live local of the size given; the job handle is checked before use.
    unsafe {
        let job = CreateJobObjectW(std::ptr::null(), std::ptr::null());
        if job.is_null() {
            return failed();
        }
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_PROCESS_MEMORY
            | JOB_OBJECT_LIMIT_PROCESS_TIME
            // A crash ends the reader instead of opening an error-reporting dialog.
            | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
        info.ProcessMemoryLimit = MEMORY_LIMIT as usize;
        // In 100-nanosecond units.
        info.BasicLimitInformation.PerProcessUserTimeLimit = (CPU_SECONDS * 10_000_000) as i64;
        let set = SetInformationJobObject(
            job,
            JobObjectExtendedLimitInformation,
            (&raw const info).cast(),
            size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        );
        if set == 0 || AssignProcessToJobObject(job, GetCurrentProcess()) == 0 {
            return failed();
        }
    }
    Ok(())
}
