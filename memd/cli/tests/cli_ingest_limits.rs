//! `memd ingest` on hostile files (issue 17, item 4): a PDF whose streams inflate past the
//! reader's memory limit is refused by the confined child while the CLI stays small; FIFOs and
//! devices (also through a symlink) are refused before anything is read. No daemon needed:
//! every refusal comes before the CLI connects; an ordinary PDF is stored (with a daemon).

mod cli_support;

use cli_support::User;
use std::io::Write;
use std::time::{Duration, Instant};

/// A one-page PDF whose content stream inflates to `inflated` zero bytes.
fn pdf_bomb(inflated: usize) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let block = vec![0u8; 1 << 20];
    for _ in 0..inflated / block.len() {
        z.write_all(&block).unwrap();
    }
    let stream = z.finish().unwrap();
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    let objects: [Vec<u8>; 4] = [
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>".to_vec(),
        [
            format!(
                "<< /Length {} /Filter /FlateDecode >>\nstream\n",
                stream.len()
            )
            .into_bytes(),
            stream,
            b"\nendstream".to_vec(),
        ]
        .concat(),
    ];
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        pdf.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

#[test]
fn a_pdf_that_inflates_past_the_limit_is_refused_by_the_confined_reader() {
    let user = User::new();
    let bomb = pdf_bomb(1536 << 20);
    assert!(bomb.len() < 2 << 20, "a small file: {} bytes", bomb.len());
    let file = user.root.path().join("bomb.pdf");
    std::fs::write(&file, &bomb).unwrap();
    let started = Instant::now();
    let out = user.memd(&["ingest", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("needs more than 1024 MB of memory"),
        "refused for its cost: {err}"
    );
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn fifos_and_devices_are_refused_before_anything_is_read() {
    let user = User::new();
    let fifo = user.root.path().join("pipe.txt");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let zero = user.root.path().join("zero.txt");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let dir = user.root.path().join("notes.md");
    std::fs::create_dir(&dir).unwrap();
    for path in [&fifo, &zero, &dir] {
        // Nobody writes to the FIFO: an attempt to read it would hang the test here.
        let out = user.memd(&["ingest", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}", path.display());
        assert!(
            err.contains("not a regular file"),
            "{}: {err}",
            path.display()
        );
    }
}

/// An ordinary PDF goes through the same confined reader and is stored.
#[test]
fn an_ordinary_pdf_is_read_by_the_confined_reader() {
    let pdf = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../engine/tests/fixtures/sample.pdf"
    );
    let user = User::new();
    let _d = cli_support::Daemon::start(&user);
    let out = user.ok(&["ingest", pdf, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["title"], "sample");
    assert!(v["chunks"].as_u64().unwrap() >= 1, "{v}");
}

/// Issue 36, item 9: `memd ingest` followed a symlink out of the folder it was pointed at
/// (`/etc/shadow` as root): a folder someone else can write could hand memd any file this user
/// can read. A link out of the named directory is refused before anything is read or sent; a
/// link inside it, and the outside file named itself, are fine.
#[test]
fn a_symlink_out_of_the_named_directory_is_refused() {
    let user = User::new();
    let secret = user.root.path().join("private-notes.txt");
    std::fs::write(&secret, "root password is hunter2-walrus\n").unwrap();
    let shared = user.root.path().join("shared-folder");
    std::fs::create_dir(&shared).unwrap();
    let planted = shared.join("readme.txt");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    let out = user.memd(&["ingest", planted.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the link was followed: {err}");
    assert!(err.contains("outside"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // A directory of links inside the tree (`docs/current -> docs/v2`) is followed.
    let v2 = shared.join("v2");
    std::fs::create_dir(&v2).unwrap();
    std::fs::write(v2.join("guide.txt"), "Deploys go through make ship.\n").unwrap();
    std::os::unix::fs::symlink(v2.join("guide.txt"), shared.join("guide.txt")).unwrap();
    let _d = cli_support::Daemon::start(&user);
    let inside = user.memd(&[
        "ingest",
        shared.join("guide.txt").to_str().unwrap(),
        "--json",
    ]);
    assert!(
        inside.status.success(),
        "{}",
        String::from_utf8_lossy(&inside.stderr)
    );
    let named = user.memd(&["ingest", secret.to_str().unwrap(), "--json"]);
    assert!(
        named.status.success(),
        "{}",
        String::from_utf8_lossy(&named.stderr)
    );
}
