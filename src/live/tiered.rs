//! Precision that follows the traffic: every row in a compact base format, and the rows looked
//! up most — by counts that decay, so they follow popularity as it drifts — also in one or two
//! more precise formats, within a memory budget ("hot rows high precision, cold rows demoted").

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use crate::format::{Format, PackedTable};
use crate::{Bounds, Error};

/// A free slot.
const BASE: u32 = u32::MAX;
/// Bits of a remap word that hold the slot (the tier is above them).
const SLOT_BITS: u32 = 28;
/// The tier and slot of a remap word.
fn split(w: u32) -> (usize, usize) {
    ((w >> SLOT_BITS) as usize, (w & ((1 << SLOT_BITS) - 1)) as usize)
}

/// Bytes of a count (u16, saturating; halved every half-life).
const COUNT_BYTES: u64 = 2;

/// Bytes a map of `entries` rows to slots holds (hashbrown: a power of two of buckets at most
/// 7/8 full, 8 bytes and a control byte each).
fn map_bytes(entries: usize) -> u64 {
    if entries == 0 {
        return 0;
    }
    let buckets = (entries * 8).div_ceil(7).next_power_of_two().max(4);
    buckets as u64 * 9
}

/// How a [`TieredTable`] holds its rows.
#[derive(Clone, Debug)]
pub struct TierOptions {
    /// The formats from the most precise to the base (2 or 3): every row is in the last one,
    /// the hottest also in the others.
    pub formats: Vec<Format>,
    /// Bytes the table may hold: packed rows of every tier, a count per row (2 bytes) and the
    /// map of the rows with an upper-tier copy. What the base and the counts do not take goes to
    /// the upper tiers, in equal shares.
    pub budget: u64,
    /// Lookups after which every count is halved, so that a row's count follows its recent
    /// popularity (default: 4 × rows).
    pub half_life: Option<u64>,
}

/// What a [`TieredTable::retier`] changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetierReport {
    /// Rows given a copy in a more precise tier.
    pub promoted: usize,
    /// Rows whose copy in an upper tier was given up (to the base, or to a lower upper tier).
    pub demoted: usize,
    /// Rows the plan wanted moved that waited for a later call (past `max_moves`).
    pub deferred: usize,
}

struct Tiers {
    /// Upper tiers, most precise first, each a table of slots.
    upper: Vec<PackedTable>,
    /// The row in each slot of each upper tier (`BASE` when free).
    slot_rows: Vec<Vec<u32>>,
    /// Rows with an upper-tier copy: `tier << SLOT_BITS | slot` (the others read the base).
    remap: FxHashMap<u32, u32>,
}

impl Tiers {
    fn get(&self, r: u32) -> u32 {
        self.remap.get(&r).copied().unwrap_or(BASE)
    }
}

struct Counts {
    counts: Vec<u16>,
    since_halving: u64,
}

/// A table whose rows move between two or three formats by how often they are looked up,
/// within a memory budget: every row in the base format, the most looked-up also in the more
/// precise ones. Lookups read each row's most precise copy and count it; [`TieredTable::retier`]
/// moves rows towards the plan the counts give, at most `max_moves` a call, quantising promoted
/// rows again from the source (the f32 or f16 table the tiers were made from). Lookups run
/// beside `retier` (it encodes the rows it promotes first, and takes the write lock only to copy
/// them in).
pub struct TieredTable {
    source: PackedTable,
    options: TierOptions,
    base: PackedTable,
    tiers: RwLock<Tiers>,
    counts: Mutex<Counts>,
    /// One `retier` at a time (its plan is made from the tiers it then changes).
    retiering: Mutex<()>,
}

impl TieredTable {
    /// Every row of `source` (dequantised; keep it in f32 or f16 to promote rows losslessly) in
    /// the base format, and no row in an upper tier yet (the first [`TieredTable::retier`] after
    /// some lookups, or [`TieredTable::retier_with_counts`], puts them there).
    pub fn new(source: PackedTable, options: TierOptions) -> Result<TieredTable, Error> {
        let n = options.formats.len();
        if !(2..=3).contains(&n) {
            return Err(Error::ShapeMismatch { what: "formats of a tiered table (the precise ones, then the base)", expected: 2, actual: n });
        }
        if source.rows() >= 1 << SLOT_BITS {
            return Err(Error::LimitExceeded { what: "rows of a tiered table", requested: source.rows() as u64, max: (1 << SLOT_BITS) - 1 });
        }
        let (rows, dim) = (source.rows(), source.dim());
        let base_format = options.formats[n - 1];
        let fixed = rows as u64 * (base_format.row_bytes(dim) as u64 + COUNT_BYTES);
        let Some(upper_bytes) = options.budget.checked_sub(fixed) else {
            return Err(Error::LimitExceeded { what: "bytes of a tiered table's base (every row and its count)", requested: fixed, max: options.budget });
        };
        // Slots per upper tier: an equal share of the bytes left each, a slot costing its row and
        // about 12 bytes of the map; then fewer until the map's real size fits too.
        let share = upper_bytes / (n as u64 - 1);
        let mut slots: Vec<usize> = options.formats[..n - 1].iter().map(|f| (share / (f.row_bytes(dim) as u64 + 12)).min(rows as u64) as usize).collect();
        let total = |slots: &[usize]| -> u64 {
            slots.iter().zip(&options.formats).map(|(&s, f)| s as u64 * f.row_bytes(dim) as u64).sum::<u64>() + map_bytes(slots.iter().sum())
        };
        while total(&slots) > upper_bytes {
            slots.iter_mut().for_each(|s| *s -= (*s).div_ceil(20));
        }
        let mut upper = Vec::new();
        for (&f, &s) in options.formats.iter().zip(&slots) {
            upper.push(PackedTable::zeroed(f, s, dim, "tiered table's upper tier")?);
        }
        let base = source.requantize(base_format)?;
        let slot_rows = upper.iter().map(|t| vec![BASE; t.rows()]).collect();
        let mut remap = FxHashMap::default();
        remap.reserve(slots.iter().sum());
        Ok(TieredTable {
            source,
            options,
            base,
            tiers: RwLock::new(Tiers { upper, slot_rows, remap }),
            counts: Mutex::new(Counts { counts: vec![0; rows], since_halving: 0 }),
            retiering: Mutex::new(()),
        })
    }

    /// Rows of the table.
    pub fn rows(&self) -> usize {
        self.base.rows()
    }
    /// Values per row.
    pub fn dim(&self) -> usize {
        self.base.dim()
    }
    /// Bytes held: packed rows of every tier, the counts and the map of upper-tier copies (not
    /// the source).
    pub fn bytes(&self) -> u64 {
        let tiers = self.tiers.read();
        let slots: usize = tiers.upper.iter().map(PackedTable::rows).sum();
        self.base.bytes() + tiers.upper.iter().map(PackedTable::bytes).sum::<u64>() + COUNT_BYTES * self.rows() as u64 + map_bytes(slots)
    }
    /// Slots of each upper tier, most precise first.
    pub fn tier_slots(&self) -> Vec<usize> {
        self.tiers.read().upper.iter().map(PackedTable::rows).collect()
    }
    /// Rows with a copy in each upper tier now, most precise first.
    pub fn tier_rows(&self) -> Vec<usize> {
        self.tiers.read().slot_rows.iter().map(|s| s.iter().filter(|&&r| r != BASE).count()).collect()
    }
    /// The tier row `r` is read from (0: the most precise; `formats.len() − 1`: the base).
    pub fn tier_of(&self, r: usize) -> Option<usize> {
        if r >= self.rows() {
            return None;
        }
        let w = self.tiers.read().get(r as u32);
        Some(if w == BASE { self.options.formats.len() - 1 } else { split(w).0 })
    }

    /// Gathers `ids` into `ids.len() × dim` f32, each row from its most precise copy, and counts
    /// the lookups.
    pub fn gather(&self, ids: &[u32], bounds: Bounds) -> Result<Vec<f32>, Error> {
        let (rows, dim) = (self.rows(), self.dim());
        bounds.check(ids, rows)?;
        let mut out = crate::cpu::zeroed(ids.len(), dim, "gather output")?;
        {
            let tiers = self.tiers.read();
            crate::par::for_each_chunk_mut(&mut out, dim, 256, |first, block| {
                for (&id, dst) in ids[first..].iter().zip(block.chunks_exact_mut(dim)) {
                    let Some(r) = bounds.resolve(id, rows) else { continue };
                    match tiers.get(r as u32) {
                        BASE => self.base.decode_row_into(r, dst),
                        w => {
                            let (t, slot) = split(w);
                            tiers.upper[t].decode_row_into(slot, dst)
                        }
                    }
                }
                None::<()>
            });
        }
        self.count(ids.iter().filter_map(|&id| bounds.resolve(id, rows)));
        Ok(out)
    }

    fn count(&self, rows: impl Iterator<Item = usize>) {
        let half_life = self.options.half_life.unwrap_or(4 * self.rows() as u64).max(1);
        let mut c = self.counts.lock();
        for r in rows {
            c.counts[r] = c.counts[r].saturating_add(1);
            c.since_halving += 1;
            if c.since_halving >= half_life {
                c.counts.iter_mut().for_each(|x| *x /= 2);
                c.since_halving = 0;
            }
        }
    }

    /// Moves rows towards the plan of the counts so far — the highest counts in the most
    /// precise tier, the next in the next — at most `max_moves` promotions, the hottest first.
    pub fn retier(&self, max_moves: usize) -> Result<RetierReport, Error> {
        let counts: Vec<f32> = self.counts.lock().counts.iter().map(|&c| f32::from(c)).collect();
        self.retier_with_counts(&counts, max_moves)
    }

    /// [`TieredTable::retier`] by `counts` (one per row) instead of the lookups': a static plan
    /// from counts known ahead (a sample of the traffic).
    pub fn retier_with_counts(&self, counts: &[f32], max_moves: usize) -> Result<RetierReport, Error> {
        if counts.len() != self.rows() {
            return Err(Error::ShapeMismatch { what: "counts of a tiered table (one per row)", expected: self.rows(), actual: counts.len() });
        }
        let _one = self.retiering.lock();
        let upper_slots = self.tier_slots();
        let wanted: usize = upper_slots.iter().sum();
        // The rows of the upper tiers by the plan: the `wanted` highest counts (ties: lower row),
        // a row with no count never among them.
        let mut order: Vec<u32> = (0..self.rows() as u32).filter(|&r| counts[r as usize] > 0.0).collect();
        let by_count = |a: &u32, b: &u32| counts[*b as usize].total_cmp(&counts[*a as usize]).then(a.cmp(b));
        if order.len() > wanted {
            order.select_nth_unstable_by(wanted, by_count);
            order.truncate(wanted);
        }
        order.sort_unstable_by(by_count);
        let mut plan = vec![upper_slots.len(); self.rows()]; // the base's index
        let mut at = 0;
        for (t, &slots) in upper_slots.iter().enumerate() {
            for &r in order.iter().skip(at).take(slots) {
                plan[r as usize] = t;
            }
            at += slots;
        }
        // Moves: every row whose tier is not the plan's leaves it; rows entering an upper tier,
        // the hottest first, up to `max_moves`.
        let current = self.tiers.read().remap.clone();
        let tier_now = |r: usize| current.get(&(r as u32)).map_or(upper_slots.len(), |&w| split(w).0);
        let entering: Vec<u32> = order.iter().copied().filter(|&r| plan[r as usize] != tier_now(r as usize)).collect();
        let deferred = entering.len().saturating_sub(max_moves);
        let entering = &entering[..entering.len() - deferred];
        // Encode the promoted rows, tier by tier, before the lock.
        let dim = self.dim();
        let mut encoded = Vec::new();
        for (t, &format) in self.options.formats[..upper_slots.len()].iter().enumerate() {
            let rows: Vec<u32> = entering.iter().copied().filter(|&r| plan[r as usize] == t).collect();
            let mut values = Vec::with_capacity(rows.len() * dim);
            let mut row = vec![0f32; dim];
            for &r in &rows {
                self.source.decode_row_into(r as usize, &mut row);
                values.extend_from_slice(&row);
            }
            let packed = PackedTable::quantize(format, &values, rows.len(), dim)?;
            encoded.push((rows, packed));
        }
        let mut tiers = self.tiers.write();
        let Tiers { upper, slot_rows, remap } = &mut *tiers;
        // Leaving: rows in an upper tier the plan does not put there (whether or not the row
        // they make room for is deferred).
        let before = remap.len();
        remap.retain(|&r, &mut w| {
            let (t, slot) = split(w);
            let keep = t == plan[r as usize];
            if !keep {
                slot_rows[t][slot] = BASE;
            }
            keep
        });
        let demoted = before - remap.len();
        let mut promoted = 0;
        for (t, (rows, packed)) in encoded.iter().enumerate() {
            let rw = packed.row_words();
            let mut free = slot_rows[t].iter().enumerate().filter(|(_, &r)| r == BASE).map(|(s, _)| s).collect::<Vec<_>>().into_iter();
            for (i, &r) in rows.iter().enumerate() {
                let s = free.next().expect("the plan puts no more rows in a tier than it has slots");
                upper[t].words_mut()[s * rw..(s + 1) * rw].copy_from_slice(packed.row(i));
                slot_rows[t][s] = r;
                remap.insert(r, (t as u32) << SLOT_BITS | s as u32);
                promoted += 1;
            }
        }
        Ok(RetierReport { promoted, demoted, deferred })
    }
}
