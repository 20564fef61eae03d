//! Which options of each wrapper take a value, and skipping a wrapper's options to find the
//! command it runs. Must never look past the words it is given or loop without bound.

/// Which options of a wrapper take a value (`sudo -u root`): those must be skipped together
/// with their value to find the wrapped command.
pub(super) struct Opts {
    pub short_value: &'static [u8],
    pub long_value: &'static [&'static str],
}

pub(super) struct Skipped {
    pub next: usize,
    /// Short option letters seen (a bit per ASCII byte) and long option names.
    pub short: u128,
    pub long: Vec<String>,
}

impl Skipped {
    pub fn has(&self, letter: u8) -> bool {
        letter < 128 && self.short & (1u128 << letter) != 0
    }
    pub fn has_long(&self, name: &str) -> bool {
        self.long.iter().any(|l| l == name)
    }
}

pub(super) fn skip_opts(words: &[String], mut i: usize, o: &Opts) -> Skipped {
    let mut short = 0u128;
    let mut long = Vec::new();
    while let Some(w) = words.get(i) {
        if w == "--" {
            i += 1;
            break;
        }
        if let Some(name) = w.strip_prefix("--") {
            i += 1;
            let (name, inline) = match name.split_once('=') {
                Some((n, _)) => (n, true),
                None => (name, false),
            };
            if !inline && o.long_value.contains(&name) {
                i += 1;
            }
            long.push(name.to_string());
            continue;
        }
        if w.len() < 2 || !w.starts_with('-') {
            break;
        }
        i += 1;
        let letters = &w.as_bytes()[1..];
        for (k, &b) in letters.iter().enumerate() {
            if b < 128 {
                short |= 1u128 << b;
            }
            if o.short_value.contains(&b) {
                if k + 1 == letters.len() {
                    i += 1;
                }
                break;
            }
        }
    }
    Skipped {
        next: i.min(words.len()),
        short,
        long,
    }
}

pub(super) const SUDO: Opts = Opts {
    short_value: b"ughpCDrtTU",
    long_value: &[
        "user",
        "group",
        "host",
        "prompt",
        "close-from",
        "chdir",
        "role",
        "type",
        "command-timeout",
        "other-user",
    ],
};
pub(super) const DOAS: Opts = Opts {
    short_value: b"uC",
    long_value: &[],
};
pub(super) const NONE: Opts = Opts {
    short_value: b"",
    long_value: &[],
};
pub(super) const EXEC: Opts = Opts {
    short_value: b"a",
    long_value: &[],
};
pub(super) const NICE: Opts = Opts {
    short_value: b"n",
    long_value: &["adjustment"],
};
pub(super) const TIME: Opts = Opts {
    short_value: b"fo",
    long_value: &["format", "output"],
};
pub(super) const TIMEOUT: Opts = Opts {
    short_value: b"sk",
    long_value: &["signal", "kill-after"],
};
pub(super) const STDBUF: Opts = Opts {
    short_value: b"ioe",
    long_value: &["input", "output", "error"],
};
pub(super) const IONICE: Opts = Opts {
    short_value: b"cnpPu",
    long_value: &["class", "classdata"],
};
pub(super) const PKEXEC: Opts = Opts {
    short_value: b"",
    long_value: &["user"],
};
pub(super) const CAFFEINATE: Opts = Opts {
    short_value: b"tw",
    long_value: &[],
};
pub(super) const FLOCK: Opts = Opts {
    short_value: b"wE",
    long_value: &["timeout", "conflict-exit-code"],
};
pub(super) const WATCH: Opts = Opts {
    short_value: b"nq",
    long_value: &["interval", "equexit"],
};
pub(super) const XARGS: Opts = Opts {
    short_value: b"adEILnPs",
    long_value: &[
        "arg-file",
        "delimiter",
        "eof",
        "replace",
        "max-lines",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ],
};
pub(super) const ENV: Opts = Opts {
    short_value: b"uCSP",
    long_value: &["unset", "chdir", "split-string"],
};

pub(super) const RUNUSER: Opts = Opts {
    short_value: b"ugGsw",
    long_value: &[
        "user",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
    ],
};
pub(super) const CHROOT: Opts = Opts {
    short_value: b"",
    long_value: &["userspec", "groups"],
};
pub(super) const STRACE: Opts = Opts {
    short_value: b"abeEIoOpPsSuUX",
    long_value: &[
        "trace",
        "signal",
        "output",
        "attach",
        "string-limit",
        "user",
        "env",
        "trace-path",
        "summary-sort-by",
        "columns",
    ],
};
pub(super) const UNSHARE: Opts = Opts {
    short_value: b"SGRw",
    long_value: &["setuid", "setgid", "root", "wd", "propagation", "setgroups"],
};
pub(super) const SYSTEMD_RUN: Opts = Opts {
    short_value: b"upEMHs",
    long_value: &[
        "unit",
        "property",
        "description",
        "slice",
        "setenv",
        "uid",
        "gid",
        "nice",
        "working-directory",
        "host",
        "machine",
        "on-active",
        "on-boot",
        "on-startup",
        "on-unit-active",
        "on-unit-inactive",
        "on-calendar",
        "timer-property",
        "path-property",
        "socket-property",
        "service-type",
    ],
};
pub(super) const SCREEN: Opts = Opts {
    short_value: b"SceEhpsTt",
    long_value: &["Logfile"],
};
pub(super) const PARALLEL: Opts = Opts {
    short_value: b"jSadINnLPE",
    long_value: &[
        "jobs",
        "sshlogin",
        "arg-file",
        "delimiter",
        "replace",
        "max-args",
        "max-lines",
        "max-procs",
        "joblog",
        "results",
        "colsep",
        "eof",
        "timeout",
        "retries",
        "workdir",
        "tmpdir",
    ],
};
