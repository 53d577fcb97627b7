//! Hashed embeddings: MurmurHash3 x86_32 (bit-exact with smhasher and the `mmh3` Python
//! package), the hashing trick with k seeds, hot ids with rows of their own, and DLRM's
//! quotient-remainder split. Pure Rust; the GPU kernels compute the same functions.

use crate::cpu::bag::{Resolve, Ring, Rows, MAX_K, NO_ROW, RUN};
use crate::format::PackedTable;
use crate::lookup::Lookup;
use crate::request::{HostRows, Request, Select};
use crate::Error;

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline(always)]
fn mix_k(k: u32) -> u32 {
    k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

#[inline(always)]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// MurmurHash3 x86_32 of `data` with `seed` (smhasher's `MurmurHash3_x86_32`; `mmh3.hash(data,
/// seed, signed=False)` in Python).
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        h ^= mix_k(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &byte) in tail.iter().enumerate() {
            k |= (byte as u32) << (8 * i);
        }
        h ^= mix_k(k);
    }
    fmix32(h ^ data.len() as u32)
}

/// MurmurHash3 x86_32 of a raw 64-bit id's 8 little-endian bytes (what the GPU kernel hashes).
#[inline(always)]
pub fn hash_id(id: u64, seed: u32) -> u32 {
    let mut h = seed;
    for k in [id as u32, (id >> 32) as u32] {
        h ^= mix_k(k);
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    fmix32(h ^ 8)
}

/// MurmurHash3 x86_32 of a string's UTF-8 bytes.
pub fn hash_str(s: &str, seed: u32) -> u32 {
    murmur3_x86_32(s.as_bytes(), seed)
}

/// The hashing trick with `k = seeds.len()` hashes (1 to 8): id → `k` buckets, whose rows are
/// summed (HashEmbed, Bloom embeddings). Ids listed in `hot` skip hashing: hot id `i` (in the
/// order given) owns row `buckets + i`, so the most frequent ids never collide.
#[derive(Clone, Debug, PartialEq)]
pub struct HashSpec {
    /// Buckets: the table's hashed rows (the hot rows come after them).
    pub buckets: u32,
    /// One MurmurHash3 seed per hash of an id (k = the number of seeds).
    pub seeds: Vec<u32>,
    /// Hot ids, each with a row of its own after the buckets.
    pub hot: Vec<u64>,
}

impl HashSpec {
    /// `k` hashes into `buckets` buckets with seeds 0, 1, …, k − 1, no hot ids.
    pub fn new(buckets: u32, k: u32) -> HashSpec {
        HashSpec { buckets, seeds: (0..k).collect(), hot: Vec::new() }
    }

    /// The same spec with these hot ids.
    pub fn with_hot(mut self, hot: Vec<u64>) -> HashSpec {
        self.hot = hot;
        self
    }

    /// Rows a table for this spec has: buckets, then one per hot id.
    pub fn rows(&self) -> usize {
        self.buckets as usize + self.hot.len()
    }

    /// Checks the spec and builds its hot map.
    pub fn validate(&self) -> Result<HotMap, Error> {
        if self.buckets == 0 {
            return Err(Error::Unsupported(crate::Unsupported::HashedTableWithoutBuckets));
        }
        if self.seeds.is_empty() || self.seeds.len() > MAX_K {
            return Err(Error::LimitExceeded { what: "hashes per id (k)", requested: self.seeds.len() as u64, max: MAX_K as u64 });
        }
        if self.rows() > u32::MAX as usize {
            return Err(Error::LimitExceeded { what: "rows of a hashed table", requested: self.rows() as u64, max: u32::MAX as u64 });
        }
        let mut map: Vec<(u64, u32)> = self.hot.iter().enumerate().map(|(i, &id)| (id, self.buckets + i as u32)).collect();
        map.sort_unstable_by_key(|e| e.0);
        if let Some(w) = map.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::DuplicateHotId { id: w[0].0 });
        }
        Ok(HotMap::new(map))
    }

    /// The rows id `id` reads: its hot row, or its k buckets.
    pub fn rows_of(&self, map: &HotMap, id: u64, out: &mut Vec<u32>) {
        out.clear();
        match map.get(id) {
            Some(row) => out.push(row),
            None => out.extend(self.seeds.iter().map(|&s| hash_id(id, s) % self.buckets)),
        }
    }
}

/// Hot ids, each with its row: sorted (what the GPU kernel binary-searches) and in an
/// open-addressing table (what the CPU path probes).
#[derive(Clone, Debug, PartialEq)]
pub struct HotMap {
    sorted: Vec<(u64, u32)>,
    /// `(id, row)` at `slot(id)` or the next free slot after it, `(_, EMPTY)` where free; a
    /// power of two of slots, at most half of them taken, so a lookup usually reads one slot.
    table: Vec<(u64, u32)>,
    shift: u32,
}

/// The row of a free slot of [`HotMap`]'s table: no row of a hashed table is `u32::MAX`
/// ([`HashSpec::validate`] keeps rows below it).
const EMPTY: u32 = u32::MAX;

impl HotMap {
    /// The map of `(id, row)` pairs sorted by id, with no id twice.
    fn new(sorted: Vec<(u64, u32)>) -> HotMap {
        // The first slot a cold id probes is usually free, so a lookup reads one slot and its
        // one branch goes the usual way: at most 1/16 full up to 128 hot ids (32 KiB or less, in
        // L1), a quarter up to 4096 (256 KiB or less), half beyond.
        let n = sorted.len();
        let bits = (if n <= 128 {
            16 * n
        } else if n <= 4096 {
            4 * n
        } else {
            2 * n
        })
        .next_power_of_two()
        .trailing_zeros()
        .max(1);
        let mut map = HotMap { table: vec![(0, EMPTY); 1 << bits], shift: 64 - bits, sorted };
        let mask = map.table.len() - 1;
        for &(id, row) in &map.sorted {
            let mut i = map.slot(id);
            while map.table[i].1 != EMPTY {
                i = (i + 1) & mask;
            }
            map.table[i] = (id, row);
        }
        map
    }

    /// Fibonacci hashing of an id to its first slot.
    #[inline(always)]
    fn slot(&self, id: u64) -> usize {
        (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The row of hot id `id`, if it is one.
    #[inline(always)]
    pub fn get(&self, id: u64) -> Option<u32> {
        let row = self.find(id);
        (row != EMPTY).then_some(row)
    }

    /// The row of hot id `id`, or [`EMPTY`]. Probes the table from the id's slot to the first
    /// free one. The ids looked up are a random mix of hot and cold, so whether an id is hot
    /// is selected, not branched on; the one branch, whether to probe on, is almost never taken.
    #[inline(always)]
    pub(crate) fn find(&self, id: u64) -> u32 {
        let mask = self.table.len() - 1;
        let mut i = self.slot(id);
        loop {
            let (key, row) = self.table[i];
            let found = key == id && row != EMPTY;
            if found || row == EMPTY {
                return if found { row } else { EMPTY };
            }
            i = (i + 1) & mask;
        }
    }

    /// The hot ids and their rows, sorted by id.
    pub fn sorted(&self) -> &[(u64, u32)] {
        &self.sorted
    }
    /// Bags the offsets describe.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }
    /// Whether there are no bags.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

/// `x % d` for a fixed `d` with a multiplication instead of a division (Lemire, Kaser and Kurz,
/// "Faster remainder by direct computation", 2019): exact for every 32-bit `x` and `d ≥ 1`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastMod {
    m: u64,
    d: u32,
}

impl FastMod {
    pub(crate) fn new(d: u32) -> FastMod {
        FastMod { m: (u64::MAX / d as u64).wrapping_add(1), d }
    }

    #[inline(always)]
    pub(crate) fn rem(self, x: u32) -> u32 {
        let low = self.m.wrapping_mul(x as u64);
        ((low as u128 * self.d as u128) >> 64) as u32
    }
}

/// Hashed lookup on the CPU: each id's embedding is its hot row or the sum of its k bucket rows
/// (summed in seed order). `table` has [`HashSpec::rows`] rows.
pub fn hashed_lookup(table: &PackedTable, spec: &HashSpec, ids: &[u64]) -> Result<Vec<f32>, Error> {
    let offsets: Vec<u32> = (0..ids.len() as u32).collect();
    hashed_bags(&[table], std::slice::from_ref(spec), ids.len(), &HashedBags::new(ids, &offsets), crate::Pooling::Sum, crate::Layout::Concat)
}

/// One hashed table as a table kind: every 64-bit id (or u32 id, widened) reads its hot row or
/// the sum of its k bucket rows, as [`hashed_lookup`]; bags pool those as [`hashed_bags`] does.
/// It answers every [`Request`]; the bounds policy has nothing to do (every id has a row), and
/// [`crate::Pooling::None`] is [`crate::Unsupported::PoolingNoneOverHashedIds`].
#[derive(Clone, Debug)]
pub struct HashedTable {
    table: PackedTable,
    spec: HashSpec,
}

impl HashedTable {
    /// The kind over `table`, which has [`HashSpec::rows`] rows of `spec`.
    pub fn new(table: PackedTable, spec: HashSpec) -> Result<HashedTable, Error> {
        spec.validate()?;
        check_table_rows(&table, &spec)?;
        Ok(HashedTable { table, spec })
    }
    /// The table of buckets (then hot rows).
    pub fn table(&self) -> &PackedTable {
        &self.table
    }
    /// How its ids hash.
    pub fn spec(&self) -> &HashSpec {
        &self.spec
    }
}

impl Lookup for HashedTable {
    /// Every id has a row: `usize::MAX`.
    fn rows(&self) -> usize {
        usize::MAX
    }
    fn dim(&self) -> usize {
        self.table.dim()
    }
    fn bytes(&self) -> u64 {
        self.table.bytes()
    }
    fn lookup(&self, request: &Request<'_>) -> Result<HostRows, Error> {
        let widen = |ids: &[u32]| -> Vec<u64> { ids.iter().map(|&id| u64::from(id)).collect() };
        let bags = |bags: &HashedBags, pooling| hashed_bags(&[&self.table], std::slice::from_ref(&self.spec), bags.len(), bags, pooling, crate::Layout::Concat);
        let values = match request.select {
            Select::Keys(keys) => hashed_lookup(&self.table, &self.spec, keys)?,
            Select::Ids(ids) => hashed_lookup(&self.table, &self.spec, &widen(ids))?,
            Select::KeyBags(b, pooling) => bags(&b, pooling)?,
            Select::Bags(b, pooling) => bags(&b.with_indices(&widen(b.indices)), pooling)?,
        };
        Ok(request.finish(values))
    }
}

/// Hashed lookup of strings (tokens, categorical values) on the CPU: each string is hashed from its
/// UTF-8 bytes; hot ids do not apply (they are raw ids).
pub fn hashed_lookup_str(table: &PackedTable, spec: &HashSpec, keys: &[&str]) -> Result<Vec<f32>, Error> {
    spec.validate()?;
    check_table_rows(table, spec)?;
    let dim = table.dim();
    let mut out = crate::cpu::zeroed(keys.len(), dim, "hashed lookup output")?;
    let mut row = vec![0f32; dim];
    for (i, key) in keys.iter().enumerate() {
        let dst = &mut out[i * dim..(i + 1) * dim];
        for &s in &spec.seeds {
            table.decode_row_into((hash_str(key, s) % spec.buckets) as usize, &mut row);
            for (a, x) in dst.iter_mut().zip(&row) {
                *a += x;
            }
        }
    }
    Ok(out)
}

pub(crate) fn check_table_rows(table: &PackedTable, spec: &HashSpec) -> Result<(), Error> {
    if table.rows() != spec.rows() {
        return Err(Error::ShapeMismatch { what: "rows of a hashed table (buckets + hot ids)", expected: spec.rows(), actual: table.rows() });
    }
    Ok(())
}

/// Bags of raw 64-bit ids to hash: the same offsets conventions as bags of row indices,
/// feature-major over several tables.
pub type HashedBags<'a> = crate::Bags<'a, u64>;

/// Hashed bags turned into bags of row indices for the GPU path, whose hashing kernel writes
/// them: each id becomes `k` slots of its table (a hot id: its row and `k − 1` × [`SKIP`]),
/// offsets and weights scaled to match.
#[cfg(feature = "gpu")]
pub(crate) struct Expanded {
    /// `B·T + 1` offsets into the slots.
    pub offsets: Vec<u32>,
    pub weights: Option<Vec<f32>>,
    /// Per table: first id, one past the last id, first slot.
    pub ranges: Vec<(u32, u32, u32)>,
    pub n_slots: usize,
}

/// A slot that reads nothing: out of range of every table, pooled as a zero row under
/// [`crate::Bounds::Zero`], which contributes nothing to a sum.
pub const SKIP: u32 = u32::MAX;

/// Checks hashed bags over `specs.len()` tables and gives their `B·T + 1` offsets.
fn check_hashed_bags(specs: &[HashSpec], batch: usize, bags: &HashedBags, pooling: crate::Pooling) -> Result<Vec<u32>, Error> {
    let offsets = bags.validate(pooling, Some(batch * specs.len()))?;
    if pooling == crate::Pooling::None {
        return Err(Error::Unsupported(crate::Unsupported::PoolingNoneOverHashedIds));
    }
    if pooling != crate::Pooling::Sum && specs.iter().any(|s| s.seeds.len() > 1) {
        return Err(Error::Unsupported(crate::Unsupported::MeanOrMaxOverMultiHashedIds));
    }
    Ok(offsets)
}

#[cfg(feature = "gpu")]
pub(crate) fn expand(specs: &[HashSpec], batch: usize, bags: &HashedBags, pooling: crate::Pooling) -> Result<Expanded, Error> {
    let offsets = check_hashed_bags(specs, batch, bags, pooling)?;
    let mut out_offsets = Vec::with_capacity(offsets.len());
    let mut ranges = Vec::with_capacity(specs.len());
    let mut slot_base = 0u64;
    for (t, spec) in specs.iter().enumerate() {
        let k = spec.seeds.len() as u64;
        let (s, e) = (offsets[t * batch], offsets[(t + 1) * batch]);
        ranges.push((s, e, slot_base as u32));
        for &o in &offsets[t * batch..(t + 1) * batch] {
            out_offsets.push((slot_base + (o - s) as u64 * k) as u32);
        }
        slot_base += (e - s) as u64 * k;
        if slot_base > u32::MAX as u64 {
            return Err(Error::LimitExceeded { what: "hashed slots (ids × k) in one call", requested: slot_base, max: u32::MAX as u64 });
        }
    }
    out_offsets.push(slot_base as u32);
    let weights = bags.per_sample_weights.map(|w| {
        let mut out = Vec::with_capacity(slot_base as usize);
        for (t, spec) in specs.iter().enumerate() {
            let (s, e, _) = ranges[t];
            for &x in &w[s as usize..e as usize] {
                out.extend(std::iter::repeat_n(x, spec.seeds.len()));
            }
        }
        out
    });
    Ok(Expanded { offsets: out_offsets, weights, ranges, n_slots: slot_base as usize })
}

/// Hashed bags on the CPU: the GPU path's oracle. Table `t` has `specs[t].rows()` rows; each
/// id reads its hot row or the sum of its k buckets; bags pool ids as [`crate::cpu::embedding_bags`]
/// pools rows.
pub fn hashed_bags(
    tables: &[&PackedTable],
    specs: &[HashSpec],
    batch: usize,
    bags: &HashedBags,
    pooling: crate::Pooling,
    layout: crate::Layout,
) -> Result<Vec<f32>, Error> {
    let plan = HashedPlan::new(tables, specs, batch, bags, pooling)?;
    let mut out = crate::cpu::zeroed(plan.out_len, 1, "bag output")?;
    plan.pool(tables, specs, batch, bags, pooling, layout, &mut out);
    Ok(out)
}

/// [`hashed_bags`] into `out` (`batch × Σ dims` values): a loop that pools batch after batch
/// reuses one buffer instead of having a new one zeroed each time. Nothing is written when the
/// call is refused.
pub fn hashed_bags_into(
    tables: &[&PackedTable],
    specs: &[HashSpec],
    batch: usize,
    bags: &HashedBags,
    pooling: crate::Pooling,
    layout: crate::Layout,
    out: &mut [f32],
) -> Result<(), Error> {
    let plan = HashedPlan::new(tables, specs, batch, bags, pooling)?;
    if out.len() != plan.out_len {
        return Err(Error::ShapeMismatch { what: "bag output values", expected: plan.out_len, actual: out.len() });
    }
    plan.pool(tables, specs, batch, bags, pooling, layout, out);
    Ok(())
}

/// A CPU hashed-bags call, checked before anything is allocated or written.
struct HashedPlan {
    maps: Vec<HotMap>,
    offsets: Vec<u32>,
    out_len: usize,
}

impl HashedPlan {
    fn new(tables: &[&PackedTable], specs: &[HashSpec], batch: usize, bags: &HashedBags, pooling: crate::Pooling) -> Result<HashedPlan, Error> {
        if tables.len() != specs.len() {
            return Err(Error::ShapeMismatch { what: "hash specs (one per table)", expected: tables.len(), actual: specs.len() });
        }
        let maps = specs.iter().map(|s| s.validate()).collect::<Result<Vec<_>, _>>()?;
        for (t, s) in tables.iter().zip(specs) {
            check_table_rows(t, s)?;
        }
        // The offsets describe exactly B·T bags, so B is as real as the bags.
        let offsets = check_hashed_bags(specs, batch, bags, pooling)?;
        let out_len = batch * tables.iter().map(|t| t.dim()).sum::<usize>();
        Ok(HashedPlan { maps, offsets, out_len })
    }

    #[allow(clippy::too_many_arguments)]
    fn pool(
        &self,
        tables: &[&PackedTable],
        specs: &[HashSpec],
        batch: usize,
        bags: &HashedBags,
        pooling: crate::Pooling,
        layout: crate::Layout,
        out: &mut [f32],
    ) {
        let resolve = Hashed { specs, maps: &self.maps, buckets: specs.iter().map(|s| FastMod::new(s.buckets)).collect() };
        crate::cpu::bag::pool_bags(tables, batch, bags.indices, &self.offsets, bags.per_sample_weights, &resolve, pooling, layout, out);
    }
}

/// Raw ids hashed into rows: a hot id's row (then `k − 1` × [`NO_ROW`]), else its k buckets.
struct Hashed<'a> {
    specs: &'a [HashSpec],
    maps: &'a [HotMap],
    buckets: Vec<FastMod>,
}

impl Resolve for Hashed<'_> {
    type Id = u64;
    #[inline(always)]
    fn k(&self, t: usize) -> usize {
        self.specs[t].seeds.len()
    }
    #[inline(always)]
    fn resolve_run(&self, t: usize, _table: &Rows, ids: &[u64], ring: &mut Ring) {
        let (seeds, map, buckets) = (&self.specs[t].seeds[..], &self.maps[t], self.buckets[t]);
        // Each seed's hashes of a whole run first, lane by lane in a loop of fixed length (the
        // compiler runs it on vector registers); then the rows, id after id. A full run is read
        // where it lies; a shorter one (the last of a table's ids in a block) is copied into a
        // full one.
        let run: [u64; RUN] = ids.try_into().unwrap_or_else(|_| {
            let mut run = [0u64; RUN];
            run[..ids.len()].copy_from_slice(ids);
            run
        });
        if let [seed] = *seeds {
            // One hash per id, the common case: no k × RUN block of hashes to fill, and the rows
            // go to the ring together.
            let mut hashes = [0u32; RUN];
            for (h, &id) in hashes.iter_mut().zip(&run) {
                *h = hash_id(id, seed);
            }
            let mut rows = [0usize; RUN];
            for ((row, &id), &h) in rows.iter_mut().zip(ids).zip(&hashes) {
                let hot = map.find(id);
                *row = if hot == EMPTY { buckets.rem(h) } else { hot } as usize;
            }
            ring.extend(&rows[..ids.len()]);
            return;
        }
        let mut hashes = [[0u32; RUN]; MAX_K];
        for (h, &seed) in hashes.iter_mut().zip(seeds) {
            for (h, &id) in h.iter_mut().zip(&run) {
                *h = hash_id(id, seed);
            }
        }
        for (l, &id) in ids.iter().enumerate() {
            // Hot or cold is a select, not a branch: the ids are a random mix of both.
            let hot = map.find(id);
            for (j, h) in hashes[..seeds.len()].iter().enumerate() {
                let hot_row = if j == 0 { hot as usize } else { NO_ROW };
                ring.push(if hot == EMPTY { buckets.rem(h[l]) as usize } else { hot_row });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_mod_is_the_remainder() {
        let mut rng = crate::synth::Rng::new(5);
        let divisors = [1, 2, 3, 7, 1000, 65_521, 1 << 31, u32::MAX - 1, u32::MAX];
        let random: Vec<u32> = (0..200).map(|_| rng.next_u32().max(1)).collect();
        for d in divisors.into_iter().chain(random) {
            let m = FastMod::new(d);
            for x in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX - 1, u32::MAX].into_iter().chain((0..200).map(|_| rng.next_u32())) {
                assert_eq!(m.rem(x), x % d, "{x} % {d}");
            }
        }
    }

    #[test]
    fn hot_map_finds_exactly_its_ids() {
        let mut rng = crate::synth::Rng::new(6);
        for n in 0..40 {
            let spec = HashSpec::new(10, 1)
                .with_hot((0..n).map(|_| (rng.next_u64() >> 60 << 3) | (rng.next_u64() % 8)).collect::<std::collections::BTreeSet<_>>().into_iter().collect());
            let map = spec.validate().unwrap();
            for id in (0..130).chain([u64::MAX]) {
                let want = spec.hot.iter().position(|&h| h == id).map(|i| 10 + i as u32);
                assert_eq!(map.get(id), want, "{n} hot ids, id {id}");
            }
        }
        // Many hot ids, some sharing their low or high bits (neighbours in the probe table),
        // probed with themselves, their neighbours and random ids.
        let hot: std::collections::BTreeSet<u64> = (0..3000)
            .map(|i| match i % 3 {
                0 => i << 40,
                1 => u64::MAX - i,
                _ => rng.next_u64(),
            })
            .collect();
        let spec = HashSpec::new(1 << 20, 1).with_hot(hot.iter().copied().collect());
        let map = spec.validate().unwrap();
        let rows: std::collections::HashMap<u64, u32> = spec.hot.iter().enumerate().map(|(i, &id)| (id, (1 << 20) + i as u32)).collect();
        let probes = hot.iter().flat_map(|&h| [h, h.wrapping_add(1), h.wrapping_sub(1), h ^ (1 << 40)]);
        for id in probes.chain((0..10_000).map(|_| rng.next_u64())) {
            assert_eq!(map.get(id), rows.get(&id).copied(), "id {id}");
        }
        assert_eq!(map.sorted().len(), 3000);
        assert!(map.sorted().windows(2).all(|w| w[0].0 < w[1].0));
    }
}
