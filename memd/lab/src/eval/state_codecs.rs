//! Compact forms of late-interaction token states compared by `memd-eval states`: which tokens
//! a memory keeps (all, no markers, no punctuation, pooled) and how each kept vector is coded
//! (f32, i8, sign bits, 2-bit, product quantization, centroid + 1-bit residual).
//!
//! Owns the codecs' training (k-means, deterministic) and each codec's decode, so the study can
//! score a full-precision query against what a memory would keep (asymmetric scoring). Must
//! never be used by the daemon: these are study versions, written for clarity, not speed.

use memd_engine::models::embed::DIMS;

/// Which of a memory's token vectors are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tokens {
    All,
    /// Without `[CLS]`, the document marker and `[SEP]`.
    NoSpecial,
    /// Without those and without tokens made of punctuation only.
    NoPunct,
    /// `NoPunct`, then neighbouring vectors merged (centroid linkage) to 1/factor as many.
    Pool(usize),
}

/// How a kept vector is stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Codec {
    F32,
    /// i8 with one f32 scale per token (today's form).
    I8,
    /// One sign bit per dimension of (x - mean), decoded with the mean magnitude per dimension.
    Sign,
    /// Two bits per dimension of (x - mean) / sd (Gaussian Lloyd-Max levels).
    TwoBit,
    /// Product quantization: this many sub-vectors, 256 centroids each (one byte each).
    Pq(usize),
    /// A centroid of this many (u16 id) plus one sign bit per dimension of the residual.
    Residual(usize),
}

impl Codec {
    /// Stored bytes of one token vector.
    pub fn bytes_per_token(self) -> usize {
        match self {
            Codec::F32 => DIMS * 4,
            Codec::I8 => DIMS + 4,
            Codec::Sign => DIMS / 8,
            Codec::TwoBit => DIMS / 4,
            Codec::Pq(m) => m,
            Codec::Residual(_) => 2 + DIMS / 8,
        }
    }
}

/// What the codecs learnt from a sample of token vectors.
pub struct Trained {
    mean: Vec<f32>,
    /// Mean |x - mean| per dimension (sign codes) and standard deviation per dimension.
    abs_dev: Vec<f32>,
    sd: Vec<f32>,
    /// Product-quantization codebooks by sub-vector count: per sub-vector 256 centroids.
    pq: Vec<(usize, Vec<Vec<Vec<f32>>>)>,
    /// Centroids of the residual codec by count, with the mean |residual| per dimension.
    residual: Vec<(usize, Vec<Vec<f32>>, Vec<f32>)>,
}

impl Trained {
    /// Trains every codec in `codecs` on `sample` (unit vectors).
    pub fn train(sample: &[Vec<f32>], codecs: &[Codec]) -> Trained {
        let n = sample.len().max(1) as f32;
        let mut mean = vec![0f32; DIMS];
        for v in sample {
            mean.iter_mut().zip(v).for_each(|(m, x)| *m += x / n);
        }
        let mut abs_dev = vec![0f32; DIMS];
        let mut sd = vec![0f32; DIMS];
        for v in sample {
            for j in 0..DIMS {
                let d = v[j] - mean[j];
                abs_dev[j] += d.abs() / n;
                sd[j] += d * d / n;
            }
        }
        sd.iter_mut().for_each(|s| *s = s.sqrt().max(1e-6));
        let mut t = Trained {
            mean,
            abs_dev,
            sd,
            pq: Vec::new(),
            residual: Vec::new(),
        };
        for c in codecs {
            match *c {
                Codec::Pq(m) if !t.pq.iter().any(|(k, _)| *k == m) => {
                    let w = DIMS / m;
                    let books = (0..m)
                        .map(|s| {
                            let sub: Vec<Vec<f32>> = sample
                                .iter()
                                .map(|v| v[s * w..(s + 1) * w].to_vec())
                                .collect();
                            kmeans(&sub, 256, 10)
                        })
                        .collect();
                    t.pq.push((m, books));
                }
                Codec::Residual(k) if !t.residual.iter().any(|(c, _, _)| *c == k) => {
                    let centroids = kmeans(sample, k, 8);
                    let mut mag = vec![0f32; DIMS];
                    for v in sample {
                        let c = &centroids[nearest(&centroids, v)];
                        for j in 0..DIMS {
                            mag[j] += (v[j] - c[j]).abs() / n;
                        }
                    }
                    t.residual.push((k, centroids, mag));
                }
                _ => {}
            }
        }
        t
    }

    /// `v` as `codec` would give it back.
    pub fn decode(&self, codec: Codec, v: &[f32]) -> Vec<f32> {
        match codec {
            Codec::F32 => v.to_vec(),
            Codec::I8 => {
                let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
                let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
                v.iter()
                    .map(|x| (x / scale).round().clamp(-127.0, 127.0) * scale)
                    .collect()
            }
            Codec::Sign => (0..DIMS)
                .map(|j| {
                    let d = v[j] - self.mean[j];
                    self.mean[j] + d.signum() * self.abs_dev[j]
                })
                .collect(),
            Codec::TwoBit => (0..DIMS)
                .map(|j| {
                    let z = (v[j] - self.mean[j]) / self.sd[j];
                    let level = match z {
                        z if z < -0.9816 => -1.510,
                        z if z < 0.0 => -0.4528,
                        z if z < 0.9816 => 0.4528,
                        _ => 1.510,
                    };
                    self.mean[j] + level * self.sd[j]
                })
                .collect(),
            Codec::Pq(m) => {
                let books = &self.pq.iter().find(|(k, _)| *k == m).expect("trained").1;
                let w = DIMS / m;
                books
                    .iter()
                    .enumerate()
                    .flat_map(|(s, book)| book[nearest(book, &v[s * w..(s + 1) * w])].clone())
                    .collect()
            }
            Codec::Residual(k) => {
                let (_, centroids, mag) = self
                    .residual
                    .iter()
                    .find(|(c, _, _)| *c == k)
                    .expect("trained");
                let c = &centroids[nearest(centroids, v)];
                (0..DIMS)
                    .map(|j| c[j] + (v[j] - c[j]).signum() * mag[j])
                    .collect()
            }
        }
    }
}

fn dist2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

fn nearest(centroids: &[Vec<f32>], v: &[f32]) -> usize {
    let mut best = (0, f32::INFINITY);
    for (i, c) in centroids.iter().enumerate() {
        let d = dist2(c, v);
        if d < best.1 {
            best = (i, d);
        }
    }
    best.0
}

/// Lloyd's k-means, `iters` rounds, seeded with evenly spaced points of `data` (deterministic).
pub fn kmeans(data: &[Vec<f32>], k: usize, iters: usize) -> Vec<Vec<f32>> {
    let k = k.min(data.len()).max(1);
    let step = data.len() / k;
    let mut centroids: Vec<Vec<f32>> = (0..k).map(|i| data[i * step].clone()).collect();
    let w = centroids[0].len();
    for _ in 0..iters {
        let mut sums = vec![vec![0f32; w]; k];
        let mut counts = vec![0usize; k];
        for v in data {
            let c = nearest(&centroids, v);
            counts[c] += 1;
            sums[c].iter_mut().zip(v).for_each(|(s, x)| *s += x);
        }
        for (c, (sum, n)) in centroids.iter_mut().zip(sums.iter().zip(&counts)) {
            if *n > 0 {
                *c = sum.iter().map(|s| s / *n as f32).collect();
            }
        }
    }
    centroids
}

/// The kept vectors of a memory's `rows` (token `ids` beside them) under `tokens`.
pub fn keep(
    tokens: Tokens,
    ids: &[i64],
    rows: &[Vec<f32>],
    punct: &dyn Fn(i64) -> bool,
) -> Vec<Vec<f32>> {
    let n = rows.len();
    let kept = |i: usize| match tokens {
        Tokens::All => true,
        Tokens::NoSpecial => i >= 2 && i + 1 < n,
        Tokens::NoPunct | Tokens::Pool(_) => i >= 2 && i + 1 < n && !punct(ids[i]),
    };
    let mut out: Vec<Vec<f32>> = (0..n)
        .filter(|&i| kept(i))
        .map(|i| rows[i].clone())
        .collect();
    if out.is_empty() {
        // A memory of punctuation only keeps its [CLS] state.
        out = rows.iter().take(1).cloned().collect();
    }
    match tokens {
        Tokens::Pool(f) => pool(out, f),
        _ => out,
    }
}

/// Merges the most similar pair of clusters (cosine of their means) until `ceil(n / factor)`
/// remain; each cluster is its members' mean, renormalised.
fn pool(rows: Vec<Vec<f32>>, factor: usize) -> Vec<Vec<f32>> {
    let target = rows.len().div_ceil(factor.max(1));
    let mut clusters: Vec<(Vec<f32>, usize)> = rows.into_iter().map(|r| (r, 1)).collect();
    let unit = |v: &[f32]| {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        v.iter().map(|x| x / n).collect::<Vec<f32>>()
    };
    while clusters.len() > target {
        let units: Vec<Vec<f32>> = clusters.iter().map(|(s, _)| unit(s)).collect();
        let mut best = (0, 1, f32::NEG_INFINITY);
        for a in 0..units.len() {
            for b in a + 1..units.len() {
                let s: f32 = units[a].iter().zip(&units[b]).map(|(x, y)| x * y).sum();
                if s > best.2 {
                    best = (a, b, s);
                }
            }
        }
        let (sb, nb) = clusters.remove(best.1);
        let (sa, na) = &mut clusters[best.0];
        sa.iter_mut().zip(&sb).for_each(|(x, y)| *x += y);
        *na += nb;
    }
    clusters.into_iter().map(|(s, _)| unit(&s)).collect()
}
