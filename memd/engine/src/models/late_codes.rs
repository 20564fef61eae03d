//! The compact form of a memory's late-interaction token states: product quantization. Each
//! kept token vector (384 values) is cut into `SUBVECTORS` pieces and each piece stored as the
//! id (one byte) of its nearest of 256 centroids, so a token costs `SUBVECTORS` bytes instead of
//! 388 (`memd-eval states`, bench/EVAL.md section 10); only the words' tokens are coded
//! (`late::encode_memory`). A query stays full precision: MaxSim
//! reads, per query token, a table of its dot products with every centroid (asymmetric
//! scoring), so a memory's score is table look-ups.
//!
//! Owns a memory's two stored forms (`Stored`: i8 or codes), the codebook (training by
//! k-means, deterministic; its bytes and its id), coding and
//! MaxSim over codes. Must never score codes against another codebook than the one that made
//! them (`States` keeps one codebook and drops codes of any other).

use super::embed::{DIMS, TokenStates};

/// Bytes of one stored token vector: 16 (24 values a sub-vector). Alone they cost LoCoMo
/// 0.05 of MRR; the best `late::RESCORE` of their order rescored in full gain it back
/// (bench/EVAL.md section 10).
pub const SUBVECTORS: usize = 16;
/// Centroids per sub-vector (one byte of code).
pub const CENTROIDS: usize = 256;
/// Values of one sub-vector.
const SUB: usize = DIMS / SUBVECTORS;
/// k-means rounds when training.
const ROUNDS: usize = 8;

/// `SUBVECTORS` × `CENTROIDS` centroids of `SUB` values each.
#[derive(Debug, Clone, PartialEq)]
pub struct Codebook {
    centroids: Vec<f32>,
    id: u32,
}

/// One memory's codes: `tokens × SUBVECTORS` centroid ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Codes {
    codes: Box<[u8]>,
}

impl Codes {
    pub fn tokens(&self) -> usize {
        self.codes.len() / SUBVECTORS
    }

    /// Bytes held, for the budget.
    pub fn bytes(&self) -> usize {
        self.codes.len()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.codes
    }

    /// Back from `as_bytes`; `None` unless it is whole tokens.
    pub fn from_bytes(bytes: &[u8]) -> Option<Codes> {
        bytes.len().is_multiple_of(SUBVECTORS).then(|| Codes {
            codes: bytes.into(),
        })
    }
}

/// One memory's stored token states.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// i8 with a scale per token (~388 bytes a token), every token: before the codebook
    /// exists.
    Full(TokenStates),
    /// Codes against the store's codebook (`late_codes::SUBVECTORS` bytes a token).
    Coded(Codes),
}

impl Stored {
    /// Bytes held, for the budget and `memd stats`.
    pub fn bytes(&self) -> usize {
        match self {
            Stored::Full(s) => s.bytes(),
            Stored::Coded(c) => c.bytes(),
        }
    }

    pub fn tokens(&self) -> usize {
        match self {
            Stored::Full(s) => s.tokens(),
            Stored::Coded(c) => c.tokens(),
        }
    }
}

impl Codebook {
    /// Trains on `sample` (token vectors of `DIMS` values); `None` with fewer vectors than
    /// centroids (too little to learn from).
    pub fn train(sample: &[Vec<f32>]) -> Option<Codebook> {
        if sample.len() < CENTROIDS || sample.iter().any(|v| v.len() != DIMS) {
            return None;
        }
        let mut centroids = Vec::with_capacity(SUBVECTORS * CENTROIDS * SUB);
        for s in 0..SUBVECTORS {
            let piece = |v: &Vec<f32>| -> Vec<f32> { v[s * SUB..(s + 1) * SUB].to_vec() };
            let pieces: Vec<Vec<f32>> = sample.iter().map(piece).collect();
            centroids.extend(kmeans(&pieces).into_iter().flatten());
        }
        Codebook::from_centroids(centroids)
    }

    /// Back from `as_floats`; `None` unless the count is right and every value finite.
    pub fn from_centroids(centroids: Vec<f32>) -> Option<Codebook> {
        let ok = centroids.len() == SUBVECTORS * CENTROIDS * SUB
            && centroids.iter().all(|c| c.is_finite());
        ok.then(|| {
            let mut h = crc32fast::Hasher::new();
            centroids.iter().for_each(|c| h.update(&c.to_le_bytes()));
            Codebook {
                id: h.finalize(),
                centroids,
            }
        })
    }

    pub fn as_floats(&self) -> &[f32] {
        &self.centroids
    }

    /// A checksum of the centroids: codes made with another codebook never match.
    pub fn id(&self) -> u32 {
        self.id
    }

    fn centroid(&self, s: usize, c: usize) -> &[f32] {
        let at = (s * CENTROIDS + c) * SUB;
        &self.centroids[at..at + SUB]
    }

    /// `rows` (token vectors of `DIMS` values) as codes.
    pub fn encode(&self, rows: &[Vec<f32>]) -> Codes {
        let mut codes = Vec::with_capacity(rows.len() * SUBVECTORS);
        for row in rows {
            for s in 0..SUBVECTORS {
                let piece = &row[s * SUB..(s + 1) * SUB];
                let best = (0..CENTROIDS)
                    .map(|c| (c, dist2(self.centroid(s, c), piece)))
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .map_or(0, |(c, _)| c);
                codes.push(best as u8);
            }
        }
        Codes {
            codes: codes.into(),
        }
    }

    /// The vectors `codes` stand for (for tests and studies).
    pub fn decode(&self, codes: &Codes) -> Vec<Vec<f32>> {
        codes
            .codes
            .chunks_exact(SUBVECTORS)
            .map(|token| {
                let pieces = token.iter().enumerate();
                pieces
                    .flat_map(|(s, &c)| self.centroid(s, c as usize).iter().copied())
                    .collect()
            })
            .collect()
    }

    /// Per query token, its dot product with every centroid: what MaxSim reads. Laid out for
    /// blocks of `LANES` query tokens side by side (`QueryTable`) and computed that way: each
    /// centroid value multiplies the block's values of its dimension, in the order a per-token
    /// dot product takes them (the same sums to the bit).
    pub fn table(&self, query: &[Vec<f32>]) -> QueryTable {
        let blocks = query.len().div_ceil(LANES);
        let mut dots = vec![[0f32; LANES]; blocks * ROWS];
        for (b, rows) in dots.chunks_exact_mut(ROWS).enumerate() {
            // The block's tokens transposed: value `k` of each side by side (padding 0).
            let mut by_value = vec![[0f32; LANES]; DIMS];
            let tokens = &query[b * LANES..query.len().min((b + 1) * LANES)];
            for (l, q) in tokens.iter().enumerate() {
                for (k, &v) in q.iter().take(DIMS).enumerate() {
                    by_value[k][l] = v;
                }
            }
            for (at, row) in rows.iter_mut().enumerate() {
                let s = at / CENTROIDS;
                let centroid = &self.centroids[at * SUB..(at + 1) * SUB];
                // As `f32`'s `Sum` starts, so a lane is `dot` of its token to the bit.
                let mut sum = [-0.0f32; LANES];
                for (q, &v) in by_value[s * SUB..(s + 1) * SUB].iter().zip(centroid) {
                    for (lane, &x) in sum.iter_mut().zip(q) {
                        *lane += x * v;
                    }
                }
                *row = sum;
            }
        }
        QueryTable {
            dots,
            tokens: query.len(),
        }
    }
}

/// Query tokens a table row holds side by side: a row is whole vector registers, so MaxSim
/// adds and compares a block of query tokens at once (`memd-eval state-scale`, bench/EVAL.md
/// section 21: the table and the code MaxSim of a prompt's head in a third of the
/// instructions of one token at a time).
const LANES: usize = 8;
/// Rows of one block: one per (sub-vector, centroid).
const ROWS: usize = SUBVECTORS * CENTROIDS;

/// A query's dot products with a codebook's centroids, by blocks of `LANES` query tokens:
/// `dots[b × ROWS + s × CENTROIDS + c][l]` is query token `b × LANES + l`'s piece `s` against
/// centroid `c` of that piece. A memory token's 16 codes pick 16 rows of a block, whose sum is
/// its dot product with each of the block's query tokens.
pub struct QueryTable {
    dots: Vec<[f32; LANES]>,
    tokens: usize,
}

impl QueryTable {
    /// MaxSim: for every query token the best dot product with one of the memory's tokens,
    /// summed (0 for a memory without tokens). Each memory token's rows are summed piece by
    /// piece (the order a per-token sum takes them) and the best kept lane by lane.
    pub fn maxsim(&self, doc: &Codes) -> f32 {
        let mut total = 0f32;
        for (b, block) in self.dots.chunks_exact(ROWS).enumerate() {
            let block: &[[f32; LANES]; ROWS] = block.try_into().expect("whole blocks");
            let mut best = [f32::NEG_INFINITY; LANES];
            for token in doc.codes.chunks_exact(SUBVECTORS) {
                let token: &[u8; SUBVECTORS] = token.try_into().expect("whole tokens");
                let mut sum = [0f32; LANES];
                for (s, &c) in token.iter().enumerate() {
                    let row = &block[s * CENTROIDS + c as usize];
                    for (lane, &x) in sum.iter_mut().zip(row) {
                        *lane += x;
                    }
                }
                for (lane, &x) in best.iter_mut().zip(&sum) {
                    *lane = lane.max(x);
                }
            }
            for &v in &best[..LANES.min(self.tokens - b * LANES)] {
                if v.is_finite() {
                    total += v;
                }
            }
        }
        total
    }
}

/// The plain dot product the tests' reference MaxSim uses.
#[cfg(test)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn dist2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Lloyd's k-means into `CENTROIDS`, seeded with evenly spaced points (deterministic).
fn kmeans(data: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let step = data.len() / CENTROIDS;
    let mut centroids: Vec<Vec<f32>> = (0..CENTROIDS).map(|i| data[i * step].clone()).collect();
    for _ in 0..ROUNDS {
        let mut sums = vec![vec![0f32; SUB]; CENTROIDS];
        let mut counts = vec![0usize; CENTROIDS];
        for v in data {
            let c = (0..CENTROIDS)
                .map(|c| (c, dist2(&centroids[c], v)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(0, |(c, _)| c);
            counts[c] += 1;
            sums[c].iter_mut().zip(v).for_each(|(s, x)| *s += x);
        }
        for ((c, sum), n) in centroids.iter_mut().zip(sums).zip(counts) {
            if n > 0 {
                *c = sum.into_iter().map(|s| s / n as f32).collect();
            }
        }
    }
    centroids
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `n` unit vectors spread over every dimension (deterministic).
    pub(crate) fn unit_vectors(n: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                let mut v: Vec<f32> = (0..DIMS)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                    })
                    .collect();
                let n = v.iter().map(|a| a * a).sum::<f32>().sqrt();
                v.iter_mut().for_each(|a| *a /= n);
                v
            })
            .collect()
    }

    /// A codebook trained on 300 such vectors.
    pub(crate) fn sample_codebook() -> Codebook {
        Codebook::train(&unit_vectors(300, 1)).expect("enough vectors")
    }

    #[test]
    fn codes_round_trip_through_bytes_and_the_codebook_through_floats() {
        let book = sample_codebook();
        let rows = unit_vectors(5, 2);
        let codes = book.encode(&rows);
        assert_eq!((codes.tokens(), codes.bytes()), (5, 5 * SUBVECTORS));
        assert_eq!(Codes::from_bytes(codes.as_bytes()), Some(codes.clone()));
        assert_eq!(
            Codes::from_bytes(&codes.as_bytes()[1..]),
            None,
            "a part token"
        );
        let again = Codebook::from_centroids(book.as_floats().to_vec()).unwrap();
        assert_eq!((again.id(), again.encode(&rows)), (book.id(), codes));
        assert!(Codebook::from_centroids(vec![0.0; 3]).is_none());
        let mut nan = book.as_floats().to_vec();
        nan[7] = f32::NAN;
        assert!(Codebook::from_centroids(nan).is_none());
    }

    #[test]
    fn too_few_vectors_train_nothing_and_the_same_vectors_the_same_codebook() {
        assert!(Codebook::train(&unit_vectors(CENTROIDS - 1, 3)).is_none());
        assert_eq!(sample_codebook(), sample_codebook());
    }

    #[test]
    fn table_maxsim_is_maxsim_over_the_decoded_vectors() {
        let book = sample_codebook();
        let doc = book.encode(&unit_vectors(7, 4));
        let query = unit_vectors(3, 5);
        let decoded = book.decode(&doc);
        let direct: f32 = query
            .iter()
            .map(|q| decoded.iter().map(|d| dot(q, d)).fold(f32::MIN, f32::max))
            .sum();
        let looked_up = book.table(&query).maxsim(&doc);
        assert!((direct - looked_up).abs() < 1e-4, "{direct} vs {looked_up}");
        assert_eq!(book.table(&query).maxsim(&book.encode(&[])), 0.0);
    }

    /// MaxSim over codes as it was first written: a table per query token, a memory token's
    /// 16 look-ups summed one by one.
    fn maxsim_one_token_at_a_time(book: &Codebook, query: &[Vec<f32>], doc: &Codes) -> f32 {
        let mut total = 0f32;
        for q in query {
            let mut best = f32::NEG_INFINITY;
            for token in doc.codes.chunks_exact(SUBVECTORS) {
                let mut sum = 0f32;
                for (s, &c) in token.iter().enumerate() {
                    sum += dot(&q[s * SUB..(s + 1) * SUB], book.centroid(s, c as usize));
                }
                best = best.max(sum);
            }
            if best.is_finite() {
                total += best;
            }
        }
        total
    }

    /// The table's layout (query tokens side by side, padded to whole blocks) changes no bit
    /// of any score: every query length around a block's edge, memories of 0 to 60 tokens.
    #[test]
    fn the_side_by_side_table_scores_to_the_bit_as_one_token_at_a_time() {
        let book = sample_codebook();
        for (n, seed) in [(1, 3), (7, 4), (8, 5), (9, 6), (15, 7), (16, 8), (32, 9)] {
            let query = unit_vectors(n, seed);
            let table = book.table(&query);
            for len in [0, 1, 13, 60] {
                let doc = book.encode(&unit_vectors(len, seed * 100 + len as u64));
                let (got, want) = (
                    table.maxsim(&doc),
                    maxsim_one_token_at_a_time(&book, &query, &doc),
                );
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{n} query tokens, {len}: {got} vs {want}"
                );
            }
        }
        assert_eq!(
            book.table(&[]).maxsim(&book.encode(&unit_vectors(3, 1))),
            0.0
        );
    }

    #[test]
    fn a_trained_vector_codes_close_to_itself() {
        // Vectors the codebook was trained on come back close: well under an orthogonal one's
        // distance (2.0 for unit vectors).
        let sample = unit_vectors(300, 1);
        let book = Codebook::train(&sample).unwrap();
        let back = book.decode(&book.encode(&sample[..20]));
        for (a, b) in sample.iter().zip(&back) {
            assert!(dist2(a, b) < 0.8, "{}", dist2(a, b));
        }
    }
}
