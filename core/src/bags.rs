//! EmbeddingBag inputs: indices grouped into bags by offsets, with PyTorch's and FBGEMM's
//! semantics, validated once on the host for both paths.

use crate::format::PackedTable;
use crate::{Bounds, Error};

/// How the rows of one bag are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Pooling {
    /// Σ wᵢ·rowᵢ (wᵢ = 1 without per-sample weights). An empty bag is a zero row.
    #[default]
    Sum,
    /// (Σ rowᵢ) / n over the n indices of the bag. An empty bag is a zero row.
    Mean,
    /// Element-wise maximum. An empty bag is a zero row.
    Max,
    /// No pooling: one output row per index (wᵢ·rowᵢ), FBGEMM's `NONE`.
    None,
}

impl Pooling {
    /// The pooling's name ("sum", "mean", "max", "none").
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Sum => "sum",
            Pooling::Mean => "mean",
            Pooling::Max => "max",
            Pooling::None => "none",
        }
    }

    /// The pooling's code in the kernels' parameters (`bag.wgsl`).
    pub fn shader_code(self) -> u32 {
        match self {
            Pooling::Sum => 0,
            Pooling::Mean => 1,
            Pooling::Max => 2,
            Pooling::None => 3,
        }
    }
}

/// Bags of row indices, as `torch.nn.EmbeddingBag` takes them.
///
/// With `include_last_offset == false` (PyTorch's default) `offsets` has one entry per bag, the
/// start of each, and the last bag runs to the end of `indices`. With `true`, it has one more
/// entry, the end of the last bag (FBGEMM's convention). Offsets start at 0, never decrease and
/// never pass `indices.len()`.
///
/// For several tables at once (FBGEMM's table-batched embedding), bags are feature-major: the
/// `B` bags of table 0, then the `B` bags of table 1, and so on — `B·T` bags, `B·T + 1` offsets
/// with the last included.
///
/// `I` is the index type: `u32` row ids, or `u64` raw ids for hashed tables
/// (`edo::hash::HashedBags`).
#[derive(Clone, Copy, Debug)]
pub struct Bags<'a, I = u32> {
    /// The row index of each lookup, bag after bag.
    pub indices: &'a [I],
    /// Where each bag starts in `indices` (see above for the two conventions).
    pub offsets: &'a [u32],
    /// Whether `offsets` ends with the end of the last bag (FBGEMM) or not (PyTorch).
    pub include_last_offset: bool,
    /// One weight per index, multiplied into its row (`Sum` and `None` pooling only, as PyTorch).
    pub per_sample_weights: Option<&'a [f32]>,
}

impl<'a, I> Bags<'a, I> {
    /// Bags with PyTorch's default offsets (one start per bag) and no weights.
    pub fn new(indices: &'a [I], offsets: &'a [u32]) -> Self {
        Bags { indices, offsets, include_last_offset: false, per_sample_weights: None }
    }

    /// The same bags with `offsets` that include the end of the last bag.
    pub fn include_last_offset(mut self, include: bool) -> Self {
        self.include_last_offset = include;
        self
    }

    /// The same bags with one weight per index.
    pub fn weights(mut self, weights: &'a [f32]) -> Self {
        self.per_sample_weights = Some(weights);
        self
    }

    /// The same offsets and weights over other indices (as many).
    #[doc(hidden)]
    pub fn with_indices<'b, J>(&self, indices: &'b [J]) -> Bags<'b, J>
    where
        'a: 'b,
    {
        debug_assert_eq!(indices.len(), self.indices.len());
        Bags { indices, offsets: self.offsets, include_last_offset: self.include_last_offset, per_sample_weights: self.per_sample_weights }
    }

    /// Number of bags the offsets describe.
    pub fn len(&self) -> usize {
        if self.include_last_offset {
            self.offsets.len().saturating_sub(1)
        } else {
            self.offsets.len()
        }
    }

    /// Whether there are no bags.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks everything that does not depend on the table and returns the offsets in the
    /// `n_bags + 1` form. `expected_bags` is `B·T` for a batch of tables.
    #[doc(hidden)]
    pub fn validate(&self, pooling: Pooling, expected_bags: Option<usize>) -> Result<Vec<u32>, Error> {
        if self.include_last_offset && self.offsets.is_empty() {
            return Err(Error::ShapeMismatch { what: "offsets with include_last_offset (bags + 1)", expected: 1, actual: 0 });
        }
        let n_bags = self.len();
        if let Some(expected) = expected_bags {
            if n_bags != expected {
                let expected_len = expected + self.include_last_offset as usize;
                return Err(Error::ShapeMismatch {
                    what: "offsets (batch × tables, + 1 with include_last_offset)",
                    expected: expected_len,
                    actual: self.offsets.len(),
                });
            }
        }
        if self.indices.len() > u32::MAX as usize {
            return Err(Error::LimitExceeded { what: "indices in one call", requested: self.indices.len() as u64, max: u32::MAX as u64 });
        }
        if let Some(w) = self.per_sample_weights {
            if w.len() != self.indices.len() {
                return Err(Error::ShapeMismatch { what: "per_sample_weights (one per index)", expected: self.indices.len(), actual: w.len() });
            }
            if !matches!(pooling, Pooling::Sum | Pooling::None) {
                return Err(Error::Unsupported(crate::Unsupported::WeightsWithMeanOrMax));
            }
            if let Some(index) = w.iter().position(|x| !x.is_finite()) {
                return Err(Error::NonFiniteWeight { index, value: w[index] });
            }
        }
        if n_bags == 0 && !self.indices.is_empty() {
            return Err(Error::ShapeMismatch { what: "offsets (indices given but no bags)", expected: 1, actual: 0 });
        }
        let mut offsets = Vec::with_capacity(n_bags + 1);
        offsets.extend_from_slice(&self.offsets[..n_bags]);
        offsets.push(if self.include_last_offset { self.offsets[n_bags] } else { self.indices.len() as u32 });
        if offsets[0] != 0 {
            return Err(Error::BadOffsets { index: 0, value: offsets[0], reason: "the first offset must be 0" });
        }
        for i in 1..offsets.len() {
            if offsets[i] < offsets[i - 1] {
                return Err(Error::BadOffsets { index: i, value: offsets[i], reason: "offsets must not decrease" });
            }
            if offsets[i] as usize > self.indices.len() {
                return Err(Error::BadOffsets { index: i, value: offsets[i], reason: "offset past the end of indices" });
            }
        }
        if self.include_last_offset && *offsets.last().unwrap_or(&0) as usize != self.indices.len() && n_bags > 0 {
            // PyTorch ignores indices past the last offset; say so rather than drop them silently.
            return Err(Error::BadOffsets { index: n_bags, value: offsets[n_bags], reason: "the last offset must equal the number of indices" });
        }
        Ok(offsets)
    }
}

/// How the outputs of several tables are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `[B, Σ dims]`: each sample's pooled rows of all tables side by side (FBGEMM TBE's output).
    #[default]
    Concat,
    /// Table after table, each `[B, dim_t]`.
    PerTable,
}

/// A bag call's inputs checked once against its tables — offsets, weights, bounds — with what
/// its output takes; the CPU path and every GPU bag kernel start from one.
#[doc(hidden)]
pub struct BagPlan {
    /// `B·T + 1` offsets.
    pub offsets: Vec<u32>,
    pub total_dim: usize,
    pub out_len: usize,
}

impl BagPlan {
    pub fn new<R: TableShape>(tables: &[R], batch: usize, bags: &Bags, pooling: Pooling, bounds: Bounds) -> Result<BagPlan, Error> {
        if tables.is_empty() {
            return Err(Error::ShapeMismatch { what: "tables", expected: 1, actual: 0 });
        }
        if pooling == Pooling::None && tables.len() != 1 {
            return Err(Error::Unsupported(crate::Unsupported::PoolingNoneOverSeveralTables));
        }
        let offsets = bags.validate(pooling, Some(batch * tables.len()))?;
        // Bounds: the indices of table t are those of its B bags.
        for (t, table) in tables.iter().enumerate() {
            let (s, e) = (offsets[t * batch] as usize, offsets[(t + 1) * batch] as usize);
            let rows = table.shape().0;
            bounds.check(&bags.indices[s..e], rows).map_err(|err| match err {
                Error::IdOutOfRange { index, id, rows } => Error::IdOutOfRange { index: s + index, id, rows },
                other => other,
            })?;
        }
        let total_dim: usize = tables.iter().map(|t| t.shape().1).sum();
        let out_len = if pooling == Pooling::None { bags.indices.len() * total_dim } else { batch * total_dim };
        Ok(BagPlan { offsets, total_dim, out_len })
    }
}

/// Rows and dim of a table, on the host or on the GPU.
#[doc(hidden)]
pub trait TableShape {
    fn shape(&self) -> (usize, usize);
}

impl TableShape for &PackedTable {
    fn shape(&self) -> (usize, usize) {
        (self.rows(), self.dim())
    }
}

impl TableShape for (usize, usize) {
    fn shape(&self) -> (usize, usize) {
        *self
    }
}
