//! The `disk_wipe` rule: formatting, wiping, repartitioning or writing raw data onto a block
//! device, and the destroy verbs of volume managers (LVM, ZFS) and NVMe drives.
//!
//! Must never flag a command that only reads or lists (`fdisk -l`, `wipefs` without `-a`,
//! `sfdisk --dump`) or a device that is not a disk (`/dev/null`, loop devices).

use super::local::split_args;
use super::{Ctx, Scan, paths};
use crate::shell::lex;

pub(crate) fn disk_wipe(ctx: &Ctx, scan: &mut Scan) {
    let cmd = ctx.cmd;
    let p = cmd.program.as_str();
    let args = &cmd.args;
    let device = || args.iter().find(|a| paths::block_device(a)).cloned();
    let has = |names: &[&str]| {
        args.iter()
            .any(|a| names.iter().any(|n| a.eq_ignore_ascii_case(n)))
    };
    let hit: Option<(&str, String)> = if p.starts_with("mkfs")
        || matches!(
            p,
            "mke2fs" | "mkswap" | "mkdosfs" | "mkntfs" | "mkexfatfs" | "newfs"
        ) {
        device().map(|d| ("formats", d))
    } else {
        match p {
            // Without `-a`/`-o` wipefs only lists signatures; `-n` is a dry run.
            "wipefs"
                if has(&["-a", "--all", "-o", "--offset", "-af", "-fa"])
                    && !has(&["-n", "--no-act"]) =>
            {
                device().map(|d| ("wipes", d))
            }
            "blkdiscard" => device().map(|d| ("wipes", d)),
            "shred" => device().map(|d| ("shreds", d)),
            "dd" => args
                .iter()
                .filter_map(|a| a.strip_prefix("of="))
                .find(|d| paths::block_device(d))
                .map(|d| ("overwrites", d.to_string())),
            "fdisk" | "gdisk" | "cfdisk" | "cgdisk" | "sfdisk" | "sgdisk" | "parted"
                if partition_write(p, args) =>
            {
                device().map(|d| ("repartitions", d))
            }
            "cryptsetup" if has(&["luksFormat", "format", "erase", "luksErase"]) => {
                device().map(|d| ("reformats", d))
            }
            "hdparm"
                if args
                    .iter()
                    .any(|a| a.starts_with("--security-erase") || a == "--trim-sector-ranges") =>
            {
                device().map(|d| ("erases", d))
            }
            "badblocks"
                if split_args(args)
                    .0
                    .iter()
                    .any(|f| !f.starts_with("--") && f.contains('w')) =>
            {
                device().map(|d| ("overwrites", d))
            }
            "tee" => device().map(|d| ("writes onto", d)),
            "nvme"
                if args.first().is_some_and(|a| {
                    matches!(a.as_str(), "format" | "sanitize" | "write-zeroes")
                }) =>
            {
                device().map(|d| ("formats", d))
            }
            "cp" | "dcfldd" | "ddrescue" => split_args(args)
                .1
                .last()
                .filter(|d| paths::block_device(d))
                .map(|d| ("overwrites", d.to_string())),
            _ => None,
        }
    };
    if let Some(what) = volume_destroy(p, args) {
        scan.add("disk_wipe", format!("{what} (`{}`)", ctx.snippet()));
    }
    if let Some((verb, dev)) = hit {
        scan.add(
            "disk_wipe",
            format!(
                "{verb} the block device {} (`{}`)",
                super::clip(&dev),
                ctx.snippet()
            ),
        );
    }
}

/// Volume managers' destroy verbs: the data on an LVM volume or a ZFS pool goes with them.
fn volume_destroy(p: &str, args: &[String]) -> Option<String> {
    let (_, operands) = split_args(args);
    match p {
        "lvremove" | "vgremove" | "pvremove" => {
            let kind = match p {
                "lvremove" => "the logical volume",
                "vgremove" => "the volume group",
                _ => "the physical volume",
            };
            let target = operands.first()?;
            Some(format!(
                "removes {kind} {} and its data",
                super::clip(target)
            ))
        }
        "zpool" => match operands.as_slice() {
            [verb, pool, ..] if matches!(*verb, "destroy" | "labelclear") => Some(format!(
                "destroys the ZFS pool {} and its data",
                super::clip(pool)
            )),
            _ => None,
        },
        _ => None,
    }
}

/// A redirection that writes straight onto a disk (`cat img > /dev/sda`, or `> /dev/sda` alone).
pub(crate) fn redirects(simple: &lex::Simple, scan: &mut Scan) {
    let target = simple
        .redirects
        .iter()
        .filter(|r| {
            matches!(
                r.op,
                lex::RedirOp::Write | lex::RedirOp::Append | lex::RedirOp::ReadWrite
            )
        })
        .find(|r| paths::block_device(&r.target.text));
    if let Some(r) = target {
        scan.add(
            "disk_wipe",
            format!(
                "writes onto the block device {} (`{}`)",
                super::clip(&r.target.text),
                super::clip(&super::render(simple))
            ),
        );
    }
}

/// Whether a partitioning tool is asked to change the table rather than print it.
fn partition_write(p: &str, args: &[String]) -> bool {
    let opts: Vec<&str> = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .map(|a| a.split('=').next().unwrap_or(a))
        .collect();
    let any = |set: &[&str]| opts.iter().any(|o| set.contains(o));
    match p {
        "parted" => args.iter().any(|a| {
            let a = a.to_ascii_lowercase();
            [
                "mklabel",
                "mktable",
                "mkpart",
                "mkpartfs",
                "rm",
                "resizepart",
                "resize",
                "rescue",
                "mkfs",
            ]
            .contains(&a.as_str())
        }),
        "sfdisk" => !any(&[
            "-l",
            "--list",
            "-d",
            "--dump",
            "-s",
            "--show-size",
            "-J",
            "--json",
            "-g",
            "--show-geometry",
            "-V",
            "--verify",
            "-F",
            "--list-free",
            "-h",
            "--help",
            "-v",
            "--version",
        ]),
        "sgdisk" => opts.iter().any(|o| {
            ![
                "-p",
                "--print",
                "-i",
                "--info",
                "-v",
                "--verify",
                "-b",
                "--backup",
                "-O",
                "--print-mbr",
                "-L",
                "--list-types",
                "-V",
                "--version",
                "-P",
                "--pretend",
            ]
            .contains(o)
        }),
        _ => !any(&[
            "-l",
            "--list",
            "-s",
            "--getsz",
            "-h",
            "--help",
            "-V",
            "--version",
            "-v",
        ]),
    }
}
