//! Figures, percentiles, targets, the machine description and the JSON/line output of
//! `memd-bench`.
//!
//! Owns how a measurement becomes a reported figure: one stdout line per figure
//! (`name unit p50 p99 n` or `name unit value`, then the load average and PASS/MISS against the
//! target when there is one) and the JSON document. Must never measure anything itself and never
//! round a number before it is stored (rounding happens only when printing).

use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// Latency samples in milliseconds.
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1000.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn extend(&mut self, other: &Samples) {
        self.0.extend_from_slice(&other.0);
    }

    /// Nearest-rank percentile (`q` in 0..=1); 0 when empty.
    pub fn percentile(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted[rank.min(sorted.len()) - 1]
    }
}

/// Which statistic a target applies to.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    P50,
    P99,
    Value,
}

/// A goal a figure is compared with.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Target {
    pub stat: Stat,
    /// True: the figure must be at most `limit`; false: at least.
    pub at_most: bool,
    pub limit: f64,
}

impl Target {
    pub fn at_most(stat: Stat, limit: f64) -> Target {
        Target {
            stat,
            at_most: true,
            limit,
        }
    }

    pub fn at_least(stat: Stat, limit: f64) -> Target {
        Target {
            stat,
            at_most: false,
            limit,
        }
    }

    fn describe(&self, unit: &str) -> String {
        let stat = match self.stat {
            Stat::P50 => "p50 ",
            Stat::P99 => "p99 ",
            Stat::Value => "",
        };
        let cmp = if self.at_most { "<=" } else { ">=" };
        format!("{stat}{cmp} {} {unit}", trim_number(self.limit))
    }
}

/// One reported figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub name: String,
    pub unit: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// 1-minute load average when the figure was taken (the machine is shared).
    pub load1: f64,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Figure {
    pub fn latency(name: &str, s: &Samples) -> Figure {
        let mut f = Figure::bare(name, "ms");
        f.p50 = Some(s.percentile(0.50));
        f.p99 = Some(s.percentile(0.99));
        f.max = Some(s.percentile(1.0));
        f.n = Some(s.len());
        if s.is_empty() {
            f.note = Some("no successful samples".into());
        }
        f
    }

    pub fn value(name: &str, unit: &str, value: f64) -> Figure {
        let mut f = Figure::bare(name, unit);
        f.value = Some(value);
        f
    }

    fn bare(name: &str, unit: &str) -> Figure {
        Figure {
            name: name.to_string(),
            unit: unit.to_string(),
            p50: None,
            p99: None,
            max: None,
            n: None,
            value: None,
            load1: load_average()[0],
            at: memd_engine::clock::rfc3339(memd_engine::clock::now_ms()),
            target: None,
            pass: None,
            note: None,
        }
    }

    pub fn with_target(mut self, t: Target) -> Figure {
        let actual = match t.stat {
            Stat::P50 => self.p50,
            Stat::P99 => self.p99,
            Stat::Value => self.value,
        };
        if let Some(x) = actual {
            self.pass = Some(if t.at_most {
                x <= t.limit
            } else {
                x >= t.limit
            });
            self.target = Some(t.describe(&self.unit));
        }
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Figure {
        self.note = Some(note.into());
        self
    }

    /// `name unit p50 p99 n` or `name unit value`, then load and verdict.
    pub fn line(&self) -> String {
        let mut s = match (self.p50, self.p99, self.n, self.value) {
            (Some(p50), Some(p99), Some(n), _) => format!(
                "{} {} {} {} {n}",
                self.name,
                self.unit,
                fmt_num(p50),
                fmt_num(p99)
            ),
            (_, _, _, Some(v)) => format!("{} {} {}", self.name, self.unit, fmt_num(v)),
            _ => format!("{} {} -", self.name, self.unit),
        };
        s.push_str(&format!("  load={:.2}", self.load1));
        if let (Some(pass), Some(target)) = (self.pass, &self.target) {
            s.push_str(&format!(
                "  {} ({target})",
                if pass { "PASS" } else { "MISS" }
            ));
        }
        if let Some(note) = &self.note {
            s.push_str(&format!("  # {note}"));
        }
        s
    }
}

fn fmt_num(x: f64) -> String {
    if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn trim_number(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
}

/// `[1 min, 5 min, 15 min]` from /proc/loadavg (zeros where unavailable).
pub fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut out = [0.0; 3];
    for (slot, field) in out.iter_mut().zip(text.split_whitespace()) {
        *slot = field.parse().unwrap_or(0.0);
    }
    out
}

/// What the figures were measured on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: String,
    /// `family.model` from /proc/cpuinfo: virtual machines often hide the model name ("AMD
    /// EPYC"), and two generations behind the same name embed at very different speeds.
    pub cpu_family_model: String,
    /// The SIMD extensions ONNX Runtime's int8 kernels use, of those the CPU has.
    pub cpu_simd: Vec<String>,
    pub mem_total_mib: u64,
    pub kernel: String,
    pub load_at_start: [f64; 3],
}

impl Machine {
    pub fn describe() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo_field(&cpuinfo, "model name")
            .unwrap_or("unknown")
            .to_string();
        let field = |name: &str| cpuinfo_field(&cpuinfo, name).unwrap_or("?").to_string();
        let cpu_family_model = format!("{}.{}", field("cpu family"), field("model"));
        let cpu_simd = simd_flags(cpuinfo_field(&cpuinfo, "flags").unwrap_or(""));
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_total_kib: u64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            cpu_family_model,
            cpu_simd,
            mem_total_mib: mem_total_kib / 1024,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            load_at_start: load_average(),
        }
    }

    pub fn line(&self) -> String {
        format!(
            "machine: {} cores, {} (family.model {}, {}), {} MiB RAM, kernel {}, load {:.2} {:.2} {:.2}",
            self.nproc,
            self.cpu_model,
            self.cpu_family_model,
            if self.cpu_simd.is_empty() {
                "no AVX".to_string()
            } else {
                self.cpu_simd.join(" ")
            },
            self.mem_total_mib,
            self.kernel,
            self.load_at_start[0],
            self.load_at_start[1],
            self.load_at_start[2]
        )
    }
}

/// The value of the first `name : value` line of /proc/cpuinfo whose key is exactly `name`.
fn cpuinfo_field<'a>(cpuinfo: &'a str, name: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim())
    })
}

/// The AVX family flags (AVX, AVX2, AVX-512 subsets, VNNI), in /proc/cpuinfo's order.
fn simd_flags(flags: &str) -> Vec<String> {
    flags
        .split_whitespace()
        .filter(|f| f.starts_with("avx") || f.contains("vnni") || f.starts_with("amx"))
        .map(str::to_string)
        .collect()
}

/// Everything a run reports; written after every phase so a crash keeps what was measured.
#[derive(Debug, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub memd_version: &'static str,
    pub command: String,
    pub started_at: String,
    pub machine: Machine,
    /// What was synthetic or otherwise not measured through the product path.
    pub notes: Vec<String>,
    pub figures: Vec<Figure>,
}

impl Report {
    pub fn new(command: String) -> Report {
        Report {
            tool: "memd-bench",
            memd_version: env!("CARGO_PKG_VERSION"),
            command,
            started_at: memd_engine::clock::rfc3339(memd_engine::clock::now_ms()),
            machine: Machine::describe(),
            notes: Vec::new(),
            figures: Vec::new(),
        }
    }

    /// Prints the figure's line and keeps it (a figure of the same name is replaced).
    pub fn add(&mut self, f: Figure) {
        println!("{}", f.line());
        self.figures.retain(|old| old.name != f.name);
        self.figures.push(f);
    }

    /// Keeps a note; a note on the same subject (the text before its first `:`, e.g.
    /// `size 100k-syn`) from a merged earlier run is replaced, not repeated.
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        println!("note: {note}");
        let subject = note_subject(&note).to_string();
        self.notes.retain(|old| note_subject(old) != subject);
        self.notes.push(note);
    }

    /// Keeps the figures of an earlier results file that this run does not measure again.
    pub fn merge_previous(&mut self, path: &Path) -> anyhow::Result<()> {
        let Ok(text) = std::fs::read_to_string(path) else {
            return Ok(());
        };
        let old: serde_json::Value = serde_json::from_str(&text)?;
        if let Some(figs) = old["figures"].as_array() {
            for f in figs {
                if let Ok(f) = serde_json::from_value::<FigureIn>(f.clone()) {
                    self.figures.push(f.into());
                }
            }
        }
        if let Some(notes) = old["notes"].as_array() {
            for n in notes.iter().filter_map(|n| n.as_str()) {
                if !self.notes.iter().any(|m| m == n) {
                    self.notes.push(n.to_string());
                }
            }
        }
        Ok(())
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}

fn note_subject(note: &str) -> &str {
    note.split_once(':').map_or(note, |(subject, _)| subject)
}

/// The figures of a results file as a Markdown table, in the order they were measured (the
/// "All figures" part of `bench/RESULTS.md`).
pub fn markdown_table(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a memd-bench report: {e}", path.display()))?;
    let figures: Vec<FigureIn> = serde_json::from_value(doc["figures"].clone())
        .map_err(|e| anyhow::anyhow!("{}: bad `figures`: {e}", path.display()))?;
    let mut out = String::from(
        "| figure | unit | p50 or value | p99 | n | load | target | result |\n|---|---|---|---|---|---|---|---|\n",
    );
    for f in figures {
        let main = f.p50.or(f.value).map_or("-".into(), fmt_num);
        let p99 = f.p99.map_or(String::new(), fmt_num);
        let n = f.n.map_or(String::new(), |n| n.to_string());
        let verdict = match f.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "",
        };
        let target = f
            .target
            .unwrap_or_default()
            .replace("<=", "≤")
            .replace(">=", "≥");
        out.push_str(&format!(
            "| {} | {} | {main} | {p99} | {n} | {:.2} | {target} | {verdict} |\n",
            f.name, f.unit, f.load1
        ));
    }
    Ok(out)
}

/// A figure read back from an earlier results file.
#[derive(serde::Deserialize)]
struct FigureIn {
    name: String,
    unit: String,
    p50: Option<f64>,
    p99: Option<f64>,
    max: Option<f64>,
    n: Option<usize>,
    value: Option<f64>,
    load1: f64,
    at: String,
    target: Option<String>,
    pass: Option<bool>,
    note: Option<String>,
}

impl From<FigureIn> for Figure {
    fn from(f: FigureIn) -> Figure {
        Figure {
            name: f.name,
            unit: f.unit,
            p50: f.p50,
            p99: f.p99,
            max: f.max,
            n: f.n,
            value: f.value,
            load1: f.load1,
            at: f.at,
            target: f.target,
            pass: f.pass,
            note: f.note,
        }
    }
}

/// `1k`, `10k`, `100k`, `1M`, or the plain number.
pub fn size_label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_description_tells_generations_apart() {
        let cpuinfo = "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n\
                       flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni sha_ni\n";
        assert_eq!(cpuinfo_field(cpuinfo, "model"), Some("17"));
        assert_eq!(cpuinfo_field(cpuinfo, "model name"), Some("AMD EPYC"));
        assert_eq!(cpuinfo_field(cpuinfo, "stepping"), None);
        let simd = simd_flags(cpuinfo_field(cpuinfo, "flags").unwrap_or(""));
        assert_eq!(simd, ["avx", "avx2", "avx512f", "avx512_vnni"]);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = Samples((1..=100).map(f64::from).collect());
        assert_eq!(s.percentile(0.5), 50.0);
        assert_eq!(s.percentile(0.99), 99.0);
        assert_eq!(s.percentile(1.0), 100.0);
        assert_eq!(Samples::default().percentile(0.5), 0.0);
    }

    #[test]
    fn targets_judge_the_named_statistic() {
        let s = Samples(vec![1.0, 2.0, 30.0]);
        let f = Figure::latency("x", &s).with_target(Target::at_most(Stat::P50, 10.0));
        assert_eq!(f.pass, Some(true));
        let f = Figure::latency("x", &s).with_target(Target::at_most(Stat::P99, 10.0));
        assert_eq!(f.pass, Some(false));
        let f = Figure::value("r", "1/s", 250.0).with_target(Target::at_least(Stat::Value, 300.0));
        assert_eq!(f.pass, Some(false));
        assert!(f.line().contains("MISS (>= 300 1/s)"), "{}", f.line());
    }

    #[test]
    fn a_newer_note_on_the_same_subject_replaces_the_older() {
        let mut r = Report::new("test".into());
        r.note("size 100k-syn: 13267 through the API");
        r.note("size 1M: offline");
        r.note("size 100k-syn: 13465 through the API");
        assert_eq!(
            r.notes,
            ["size 1M: offline", "size 100k-syn: 13465 through the API"]
        );
    }

    #[test]
    fn markdown_table_has_one_row_per_figure() {
        let dir = std::env::temp_dir().join(format!("memd-bench-md-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        let mut r = Report::new("test".into());
        r.figures.push(
            Figure::latency("hook_prompt.1k", &Samples(vec![4.0, 6.0, 30.0]))
                .with_target(Target::at_most(Stat::P50, 5.0)),
        );
        r.figures.push(Figure::value("binary.memd", "MB", 24.4));
        r.write(&path).unwrap();
        let table = markdown_table(&path).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 4, "{table}");
        assert!(
            rows[2].starts_with("| hook_prompt.1k | ms | 6.00 | 30.0 | 3 |"),
            "{table}"
        );
        assert!(rows[2].ends_with("| p50 ≤ 5 ms | MISS |"), "{table}");
        assert!(
            rows[3].starts_with("| binary.memd | MB | 24.4 |  |  |"),
            "{table}"
        );
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(1_000), "1k");
        assert_eq!(size_label(100_000), "100k");
        assert_eq!(size_label(1_000_000), "1M");
        assert_eq!(size_label(1_500), "1500");
    }
}
