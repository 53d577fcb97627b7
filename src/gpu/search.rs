//! Binary search on the GPU: exact Hamming top-k over sharded codes, and rescoring of the
//! candidates with a table of the same corpus, in one submission.
//!
//! Up to [`ONE_PASS_MAX_K`] results (or rescoring candidates) per query, where the blocks' lists
//! leave room for at least eight queries a submission, one pass over the codes
//! (`shaders/hamming_topk_*.wgsl`, `topk_common.wgsl`, `topk_rows*.wgsl`), per batch of queries:
//! 1. `hamming_topk_scan`: a workgroup takes a tile of up to eight queries (in workgroup memory,
//!    word-major, so each code word meets four queries in one vec4 operation) and a block of 2048
//!    rows (4096 for k > 64, with tiles of four queries), reads each code word once for the
//!    whole tile (four words a 16-byte load where rows are whole vec4s: `topk_rows4.wgsl`, else
//!    `topk_rows.wgsl`), and keeps the block's k nearest per query (a histogram of the
//!    distances, the k-th distance off its sums, the kept rows marked in bit masks and placed by
//!    the marks before them), in row order, in the query's list. The selection runs for a batch
//!    of queries at once, so its eight barriers are paid per batch, not per query;
//! 2. `hamming_topk_merge`: the k nearest of each block's worth of entries of those lists, again,
//!    until one list of k is left per query (one level per factor of block/k, at least 4);
//! 3. with rescoring, `rescore`; then `sort_pairs`.
//!
//! Each list keeps rows in order and each selection breaks ties by position, so the result is
//! the CPU path's exactly. Larger k (rescoring candidates past 1024), or lists too long for the
//! bindings, take the histogram passes, which read the codes three times:
//!
//! Kernels (`shaders/hamming_*.wgsl`, `sort_pairs.wgsl`, `rescore.wgsl`), per batch of queries:
//! 1. `hamming_hist`: each workgroup counts the distances of 1024 rows to one query in workgroup
//!    memory and adds them to the query's histogram;
//! 2. `hamming_select`: the k-th smallest distance `t` of each query, and how many rows at `t` to
//!    keep;
//! 3. `hamming_ties` + `hamming_scan`: rows at `t` per chunk, then their prefix sums, so the rows
//!    kept at `t` are the lowest-indexed ones — the CPU path's answer exactly;
//! 4. `hamming_collect`: every row below `t` and the kept rows at `t`, as (distance, row) pairs;
//! 5. with rescoring, `rescore` replaces each candidate's key by its score;
//! 6. `sort_pairs`: a bitonic sort of each query's pairs.
//!
//! Distances are recomputed in passes 1, 3 and 4 rather than stored, so the workspace is small
//! (histograms, per-chunk counts and the results) and the corpus can be any number of shards.

use super::job::buffer_range;
use super::lookup::{Placeable, Reupload};
use super::shaders::{SearchKernel, ShaderId};
use super::table::Resident;
use super::{Context, Engine, GpuTable};
use crate::format::PackedTable;
use crate::search::{self, Neighbors, Scored, MAX_K};
use crate::Error;

/// The uniform block of the search kernels (`SearchParams` in `shaders/search_common.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct SearchParams {
    n_queries: u32,
    code_words: u32,
    corpus_row_words: u32,
    query_row_words: u32,
    bins: u32,
    k: u32,
    seg: u32,
    chunks: u32,
    shard_first: u32,
    shard_rows: u32,
    chunk_base: u32,
    dim: u32,
    off_hist: u32,
    off_sel: u32,
    off_ties: u32,
    off_out: u32,
    table_row_words: u32,
    table_code_words: u32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<SearchParams>() == 80);

/// The uniform block of the one-pass kernels (`TopkParams` in `shaders/topk_common.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct TopkParams {
    n_queries: u32,
    code_words: u32,
    corpus_row_words: u32,
    query_row_words: u32,
    bins: u32,
    k: u32,
    tile: u32,
    shard_first: u32,
    shard_rows: u32,
    block_base: u32,
    in_len: u32,
    off_in: u32,
    off_out: u32,
    out_stride: u32,
    pad_to: u32,
    _pad0: u32,
}
const _: () = assert!(std::mem::size_of::<TopkParams>() == 64);

/// Rows per chunk of the histogram passes (`CHUNK` in their shaders).
const CHUNK: u64 = 1024;
/// The most results per query the one-pass kernels keep per block (larger `k` takes the
/// histogram passes): up to 64 in blocks of 2048 entries, up to 1024 in blocks of 4096 (the
/// `*Long` kernels), so that a level of merges shrinks the lists at least sixteenfold up to
/// k = 256 and at least fourfold beyond.
pub const ONE_PASS_MAX_K: usize = 1024;
/// The most results the one-pass kernels keep per block of 2048 entries, in tiles of eight queries.
/// Past it, blocks of 4096 need fewer levels of merges: on lavapipe, 32 queries over 262 144 codes
/// of 256 bits, blocks of 4096 against blocks of 1024 made 1.11× the queries/s at k = 100 and
/// 1.37× at k = 256, though their tiles hold four queries, not eight. Blocks of 2048 against 1024
/// in tiles of eight: 1.27× at k = 10 and 64 (half the workgroups, each paying the selection's
/// fixed costs once for twice the rows).
const SHORT_MAX_K: usize = 64;
/// Queries per workgroup of the one-pass scan (`MAX_TILE` in `hamming_topk_scan.wgsl`): eight
/// where their code words fit its tile (two vec4s a word, 224 in all), else four (one a word).
const MAX_TILE: u32 = 8;
/// The most code words a tile of eight queries takes (two vec4s a word of the shader's 224).
const WIDE_TILE_MAX_WORDS: u32 = 112;

/// What [`GpuCodes::plan`] chose for a search.
struct Plan {
    /// The one-pass kernels, not the histogram passes.
    one_pass: bool,
    /// Queries per submission.
    batch: u64,
    /// Pairs per query in the output lists: `kc` rounded up to a power of two.
    seg: u64,
    /// Distances there can be: bits + 1.
    bins: u64,
    /// Chunks of 1024 rows over all shards (the histogram passes).
    chunks: u64,
    /// The one-pass kernels' blocks over all shards.
    blocks: u64,
}

/// Entries per block of the one-pass kernels keeping `kc` results: 2048 up to 64, else 4096.
fn block_len(kc: usize) -> u64 {
    if kc <= SHORT_MAX_K {
        2048
    } else {
        4096
    }
}

/// What a result slot holds until a kernel writes it (no row has this index).
const UNWRITTEN: u32 = 0xffff_fffe;
/// The most candidates rescoring takes per query.
pub const MAX_CANDIDATES: usize = 8 * MAX_K;

/// Binary codes on the GPU (sharded like any table), searched by Hamming distance.
pub struct GpuCodes {
    res: Resident,
}

impl GpuCodes {
    /// Uploads a table of binary codes ([`Format::Binary`](crate::Format::Binary) or [`Format::BinaryScaled`](crate::Format::BinaryScaled)).
    pub async fn upload(engine: &Engine, codes: &PackedTable) -> Result<GpuCodes, Error> {
        search::check_corpus(codes.format(), codes.dim())?;
        Ok(GpuCodes { res: Resident::upload(engine, &[codes]).await? })
    }

    /// The codes' format ([`crate::Format::Binary`] or [`crate::Format::BinaryScaled`]).
    pub fn format(&self) -> crate::Format {
        self.res.format
    }
    /// Rows of codes (the corpus).
    pub fn rows(&self) -> usize {
        self.res.tables[0].rows as usize
    }
    /// Bits per row.
    pub fn dim(&self) -> usize {
        self.res.tables[0].dim as usize
    }
    /// Bytes of GPU memory the codes take.
    pub fn bytes(&self) -> u64 {
        self.res.bytes()
    }
    /// Names the codes in the engine's [`crate::Engine::memory_report`].
    pub fn set_name(&self, name: &str) {
        self.res.set_name(name)
    }
    /// Storage buffers the codes are split into.
    pub fn shard_count(&self) -> usize {
        self.res.shards.len()
    }

    /// Exact Hamming top-`k` of each query row: the same ids and distances as
    /// [`search::hamming_topk`], ties broken by the lower row.
    pub async fn hamming_topk(&self, queries: &PackedTable, k: usize) -> Result<Neighbors, Error> {
        search::check_codes(self.res.format, self.dim(), queries, k)?;
        let k_eff = k.min(self.rows());
        let pairs = self.run(queries, k_eff, None).await?;
        let (ids, distances) = pairs.into_iter().map(|(key, id)| (id, key)).unzip();
        Ok(Neighbors { k: k_eff, ids, distances })
    }

    /// Binary search with rescoring in one submission: the Hamming top `k × multiplier` of the
    /// binarised `queries`, ranked by the dot product of each float query with their rows of
    /// `table` (INT8 or FP32 rows of the same corpus, or the binary rows for asymmetric scores).
    /// Scores match [`search::search_rescored`]'s within rounding (the GPU sums in column order).
    pub async fn search_rescored(&self, queries: &[f32], table: &GpuTable, k: usize, multiplier: usize) -> Result<Scored, Error> {
        self.search_rescored_with(None, queries, table, k, multiplier).await
    }

    /// [`GpuCodes::search_rescored`] over codes made through `transform` (centred or ITQ codes,
    /// [`search::CodeTransform`]): the queries go through it on the CPU before their signs are
    /// taken; rescoring scores them as [`search::search_rescored_with`] does (transformed for a
    /// binary table). The same results as [`search::search_rescored_with`].
    pub async fn search_rescored_with(
        &self,
        transform: Option<&search::CodeTransform>,
        queries: &[f32],
        table: &GpuTable,
        k: usize,
        multiplier: usize,
    ) -> Result<Scored, Error> {
        search::check_k(k)?;
        let dim = self.dim();
        if table.rows() != self.rows() || table.dim() != dim {
            return Err(Error::ShapeMismatch { what: "rows of the rescoring table (the corpus rows)", expected: self.rows(), actual: table.rows() });
        }
        let codes = search::query_codes(transform, queries, dim)?; // also checks finiteness and shape
        let transformed = search::rescoring_queries(transform, table.format(), queries)?;
        let queries = transformed.as_deref().unwrap_or(queries);
        let kc = k.saturating_mul(multiplier.max(1)).min(self.rows());
        if kc > MAX_CANDIDATES {
            return Err(Error::LimitExceeded { what: "rescoring candidates (k × multiplier)", requested: kc as u64, max: MAX_CANDIDATES as u64 });
        }
        let k_out = k.min(kc);
        let pairs = self.run(&codes, kc, Some((queries, table))).await?;
        let nq = codes.rows();
        let mut ids = Vec::with_capacity(nq * k_out);
        let mut scores = Vec::with_capacity(nq * k_out);
        for q in 0..nq {
            for &(key, id) in &pairs[q * kc..q * kc + k_out] {
                ids.push(id);
                scores.push(score_of_key(key));
            }
        }
        Ok(Scored { k: k_out, ids, scores })
    }

    /// How many times a search of `queries` query rows for `candidates` results (or rescoring
    /// candidates, `k × multiplier`) each reads the corpus of codes: once per tile of queries
    /// (up to eight; four for wide codes or more than 64 results) where the one-pass kernels
    /// take it, three times per query where the histogram
    /// passes do (`candidates` > [`ONE_PASS_MAX_K`], or lists too long for the bindings).
    pub fn corpus_reads(&self, queries: usize, candidates: usize) -> Result<u64, Error> {
        let kc = candidates.min(self.rows());
        if kc == 0 || queries == 0 {
            return Ok(0);
        }
        let plan = self.plan(queries, kc)?;
        let tile = self.tile(kc) as u64;
        Ok(if plan.one_pass {
            let (full, last) = (queries as u64 / plan.batch, queries as u64 % plan.batch);
            full * plan.batch.div_ceil(tile) + last.div_ceil(tile)
        } else {
            3 * queries as u64
        })
    }

    /// Queries per workgroup of the one-pass scan keeping `kc` results: four for blocks of 4096
    /// rows (sixteen rows' distances an invocation) and for wide codes, else eight (eight rows).
    fn tile(&self, kc: usize) -> u32 {
        // search::MAX_BITS keeps code words ≤ 128, within a four-query tile.
        if self.res.tables[0].code_words <= WIDE_TILE_MAX_WORDS && kc <= SHORT_MAX_K {
            MAX_TILE
        } else {
            MAX_TILE / 2
        }
    }

    /// Which kernels search `nq` queries for `kc` results (`0 < kc ≤ rows`), and how many queries
    /// a submission takes.
    fn plan(&self, nq: usize, kc: usize) -> Result<Plan, Error> {
        let ctx = &self.res.ctx;
        let seg = kc.next_power_of_two() as u64;
        let bins = self.dim() as u64 + 1;
        let chunks: u64 = self.shard_rows().map(|r| r.div_ceil(CHUNK)).sum();
        let block = block_len(kc);
        let blocks: u64 = self.shard_rows().map(|r| r.div_ceil(block)).sum();
        let (a_pairs, b_pairs) = topk_lists(blocks, kc as u64, block);
        // Queries per submission: the workspace fits one binding and a grid dimension. The
        // one-pass kernels' lists grow with the corpus (k pairs per block): where they would
        // leave fewer than eight queries a submission, the histogram passes take the search.
        let max_words = ctx.max_binding_bytes.min(ctx.limits.max_buffer_size) / 4;
        let max_z = ctx.limits.max_compute_workgroups_per_dimension as u64;
        let one_pass_batch = (max_words / (2 * (seg + a_pairs + b_pairs))).min(max_z);
        let one_pass = kc <= ONE_PASS_MAX_K && one_pass_batch >= (nq as u64).min(8);
        let per_query = if one_pass { 2 * (seg + a_pairs + b_pairs) } else { bins + 4 + chunks + 2 * seg };
        let batch = (max_words / per_query).min(max_z);
        if batch == 0 {
            return Err(Error::LimitExceeded { what: "search workspace bytes for one query", requested: 4 * per_query, max: 4 * max_words });
        }
        Ok(Plan { one_pass, batch, seg, bins, chunks, blocks })
    }

    /// Runs the kernels for every query, `kc` results each (`kc ≤ rows`), and returns the first
    /// `kc` (key, row) pairs of each query, sorted.
    async fn run(&self, codes: &PackedTable, kc: usize, rescore: Option<(&[f32], &GpuTable)>) -> Result<Vec<(u32, u32)>, Error> {
        let ctx = &self.res.ctx;
        ctx.check_lost()?;
        let nq = codes.rows();
        if kc == 0 || nq == 0 {
            return Ok(Vec::new());
        }
        let Plan { one_pass, batch, seg, bins, chunks, blocks } = self.plan(nq, kc)?;
        let mut out = Vec::with_capacity(nq * kc);
        for q0 in (0..nq).step_by(batch as usize) {
            let n = (batch as usize).min(nq - q0);
            let pairs = if one_pass {
                self.run_batch_one_pass(ctx, codes, q0, n, kc, seg, blocks, rescore).await?
            } else {
                self.run_batch(ctx, codes, q0, n, kc, seg, bins, chunks, rescore).await?
            };
            for q in 0..n {
                let s = &pairs[q * seg as usize..];
                out.extend_from_slice(&s[..kc]);
            }
        }
        Ok(out)
    }

    /// One batch of queries by the one-pass kernels (`kc ≤ ONE_PASS_MAX_K`): one scan of the
    /// codes per tile of queries, keeping each block's `kc` nearest (`blocks` blocks of
    /// [`block_len`] rows over all shards); merges of those lists until one is left per query;
    /// rescoring if asked; the sort. Returns each query's `seg` pairs.
    #[allow(clippy::too_many_arguments)]
    async fn run_batch_one_pass(
        &self,
        ctx: &Context,
        codes: &PackedTable,
        q0: usize,
        nq: usize,
        kc: usize,
        seg: u64,
        blocks: u64,
        rescore: Option<(&[f32], &GpuTable)>,
    ) -> Result<Vec<(u32, u32)>, Error> {
        let (nq64, k) = (nq as u64, kc as u64);
        let block = block_len(kc);
        let (a_pairs, b_pairs) = topk_lists(blocks, k, block);
        // Workspace: the results (nq × seg pairs, what rescoring and the sort read), then the
        // blocks' lists, then the first merge's.
        let off_out = 0u64;
        let off_a = off_out + nq64 * seg * 2;
        let off_b = off_a + nq64 * a_pairs * 2;
        let ws_words = off_b + nq64 * b_pairs * 2;
        let qrw = codes.row_words();
        let query_words = &codes.words()[q0 * qrw..(q0 + nq) * qrw];
        let queries = ctx
            .pooled("search queries", 4 * query_words.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(query_words)), super::Fit::Class)
            .await?;
        let ws = ctx
            .create_buffer("search workspace", 4 * ws_words, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST, None)
            .await?;
        let placement = self.res.tables[0];
        let tile = self.tile(kc);
        let base = TopkParams {
            n_queries: nq as u32,
            code_words: placement.code_words,
            corpus_row_words: placement.row_words,
            query_row_words: qrw as u32,
            bins: self.dim() as u32 + 1,
            k: kc as u32,
            tile,
            ..Default::default()
        };
        let mut uniforms = Vec::new();
        // The scan, shard by shard; a single block writes the results directly.
        let (out0, stride0, pad0) = if blocks == 1 { (off_out, seg, seg) } else { (off_a, a_pairs, k) };
        let mut scans = Vec::new();
        let mut block_base = 0u64;
        for (shard, rows) in self.res.shards.iter().zip(self.shard_rows()) {
            let params = TopkParams {
                shard_first: shard.word_start / placement.row_words,
                shard_rows: rows as u32,
                block_base: block_base as u32,
                off_out: out0 as u32,
                out_stride: stride0 as u32,
                pad_to: pad0 as u32,
                ..base
            };
            let (group, uniform) = bind_group(ctx, params, &queries, &shard.buffer, &ws).await?;
            uniforms.push(uniform);
            scans.push((group, ctx.grid("blocks of one search shard", rows.div_ceil(block), 1)?));
            block_base += rows.div_ceil(block);
        }
        // Merges, alternating between the two lists, until one group of entries is left.
        let mut merges = Vec::new();
        if blocks > 1 {
            let (mut off_in, mut in_len, mut other) = (off_a, a_pairs, off_b);
            loop {
                let groups = in_len.div_ceil(block);
                let last = groups == 1;
                let (o, stride, pad) = if last { (off_out, seg, seg) } else { (other, groups * k, k) };
                let params =
                    TopkParams { in_len: in_len as u32, off_in: off_in as u32, off_out: o as u32, out_stride: stride as u32, pad_to: pad as u32, ..base };
                let (group, uniform) = bind_group(ctx, params, &queries, &self.res.shards[0].buffer, &ws).await?;
                uniforms.push(uniform);
                merges.push((group, ctx.grid("groups of a search merge", groups, 1)?));
                if last {
                    break;
                }
                (off_in, other) = (other, off_in);
                in_len = groups * k;
            }
        }
        // Rescoring and the sort read the results as the histogram passes leave them.
        let search = SearchParams {
            n_queries: nq as u32,
            code_words: placement.code_words,
            corpus_row_words: placement.row_words,
            query_row_words: qrw as u32,
            bins: base.bins,
            k: kc as u32,
            seg: seg as u32,
            off_out: off_out as u32,
            ..Default::default()
        };
        let (sort_group, uniform) = bind_group(ctx, search, &queries, &self.res.shards[0].buffer, &ws).await?;
        uniforms.push(uniform);
        let (rescore_groups, rescore_pipeline, _fqueries) = self.rescore_groups(ctx, search, rescore, q0, nq, &ws, &mut uniforms).await?;
        let pipe = |k| ctx.pipeline(ShaderId::Search(k), (256, 1));
        // Codes of whole vec4s in rows of whole vec4s (no scale word, or one padded by a row
        // alignment) are read 16 bytes a load; shards hold whole rows, so each row starts on a
        // 16-byte boundary.
        let vec4_rows = placement.code_words.is_multiple_of(4) && placement.row_words.is_multiple_of(4);
        let (scan_kernel, merge_kernel) = match (vec4_rows, kc <= SHORT_MAX_K) {
            (true, true) => (SearchKernel::TopkScan4, SearchKernel::TopkMerge),
            (false, true) => (SearchKernel::TopkScan, SearchKernel::TopkMerge),
            (true, false) => (SearchKernel::TopkScan4Long, SearchKernel::TopkMergeLong),
            (false, false) => (SearchKernel::TopkScanLong, SearchKernel::TopkMergeLong),
        };
        let (scan, merge, sort) = (pipe(scan_kernel).await?, pipe(merge_kernel).await?, pipe(SearchKernel::Sort).await?);

        // Result slots start as a sentinel no kernel writes, so a slot left unwritten is caught
        // below instead of passing for row 0.
        ctx.queue.write_buffer(&ws, 4 * off_out, bytemuck::cast_slice(&vec![UNWRITTEN; (nq64 * seg * 2) as usize]));
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo search") });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("edo search"), timestamp_writes: None });
            pass.set_pipeline(&scan);
            for (group, (gx, gy)) in &scans {
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(*gx, *gy, nq.div_ceil(tile as usize) as u32);
            }
            pass.set_pipeline(&merge);
            for (group, (gx, gy)) in &merges {
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(*gx, *gy, nq as u32);
            }
            if let Some(p) = &rescore_pipeline {
                pass.set_pipeline(p);
                for group in &rescore_groups {
                    pass.set_bind_group(0, group, &[]);
                    pass.dispatch_workgroups(kc.div_ceil(64) as u32, nq as u32, 1);
                }
            }
            pass.set_pipeline(&sort);
            pass.set_bind_group(0, &sort_group, &[]);
            pass.dispatch_workgroups(nq as u32, 1, 1);
        }
        super::checked_submit(ctx, "hamming search submission", || {
            ctx.queue.submit([encoder.finish()]);
            Ok(())
        })
        .await?;
        drop(uniforms); // submitted: the work keeps what it reads
        let words: Vec<u32> = super::read_buffer(ctx, &ws, 4 * off_out, (nq64 * seg * 2) as usize).await?;
        let pairs: Vec<(u32, u32)> = words.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        for q in 0..nq {
            if pairs[q * seg as usize..][..kc].iter().any(|&(_, id)| id == UNWRITTEN || id == u32::MAX) {
                return Err(Error::gpu("hamming search", format!("query {}: a result slot was never written", q0 + q)));
            }
        }
        Ok(pairs)
    }

    /// The rescoring pass's bind groups (one per shard of `table`), its pipeline and its float
    /// queries' buffer, if there is rescoring; `search` gives the results' place in `ws`.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    async fn rescore_groups(
        &self,
        ctx: &Context,
        search: SearchParams,
        rescore: Option<(&[f32], &GpuTable)>,
        q0: usize,
        nq: usize,
        ws: &wgpu::Buffer,
        uniforms: &mut Vec<super::Buffer>,
    ) -> Result<(Vec<wgpu::BindGroup>, Option<wgpu::ComputePipeline>, Option<super::Buffer>), Error> {
        let Some((fq, table)) = rescore else { return Ok((Vec::new(), None, None)) };
        let dim = table.dim();
        let fbuf = ctx
            .pooled(
                "search float queries",
                4 * (nq * dim) as u64,
                wgpu::BufferUsages::STORAGE,
                Some(bytemuck::cast_slice(&fq[q0 * dim..(q0 + nq) * dim])),
                super::Fit::Class,
            )
            .await?;
        let tp = table.res.tables[0];
        let mut groups = Vec::new();
        for shard in &table.res.shards {
            let params = SearchParams {
                shard_first: shard.word_start / tp.row_words,
                shard_rows: (shard.word_end - shard.word_start) / tp.row_words,
                dim: dim as u32,
                table_row_words: tp.row_words,
                table_code_words: tp.code_words,
                ..search
            };
            let (group, uniform) = bind_group(ctx, params, &fbuf, &shard.buffer, ws).await?;
            groups.push(group);
            uniforms.push(uniform);
        }
        let pipeline = ctx.pipeline(ShaderId::Rescore { format: table.format() }, (64, 1)).await?;
        Ok((groups, Some(pipeline), Some(fbuf)))
    }

    fn shard_rows(&self) -> impl Iterator<Item = u64> + '_ {
        let rw = self.res.tables[0].row_words;
        self.res.shards.iter().map(move |s| ((s.word_end - s.word_start) / rw) as u64)
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_batch(
        &self,
        ctx: &Context,
        codes: &PackedTable,
        q0: usize,
        nq: usize,
        kc: usize,
        seg: u64,
        bins: u64,
        chunks: u64,
        rescore: Option<(&[f32], &GpuTable)>,
    ) -> Result<Vec<(u32, u32)>, Error> {
        let nq64 = nq as u64;
        let off_hist = 0;
        let off_sel = off_hist + nq64 * bins;
        let off_ties = off_sel + nq64 * 4;
        let off_out = off_ties + nq64 * chunks;
        let ws_words = off_out + nq64 * seg * 2;
        let qrw = codes.row_words();
        let query_words = &codes.words()[q0 * qrw..(q0 + nq) * qrw];
        let queries = ctx
            .pooled("search queries", 4 * query_words.len() as u64, wgpu::BufferUsages::STORAGE, Some(bytemuck::cast_slice(query_words)), super::Fit::Class)
            .await?;
        let ws = ctx
            .create_buffer("search workspace", 4 * ws_words, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST, None)
            .await?;
        let placement = self.res.tables[0];
        let base = SearchParams {
            n_queries: nq as u32,
            code_words: placement.code_words,
            corpus_row_words: placement.row_words,
            query_row_words: qrw as u32,
            bins: bins as u32,
            k: kc as u32,
            seg: seg as u32,
            chunks: chunks as u32,
            off_hist: off_hist as u32,
            off_sel: off_sel as u32,
            off_ties: off_ties as u32,
            off_out: off_out as u32,
            ..Default::default()
        };
        // One bind group per corpus shard.
        let mut shard_groups = Vec::new();
        let mut uniforms = Vec::new();
        let mut chunk_base = 0u64;
        for (shard, rows) in self.res.shards.iter().zip(self.shard_rows()) {
            let params = SearchParams { shard_first: shard.word_start / placement.row_words, shard_rows: rows as u32, chunk_base: chunk_base as u32, ..base };
            let (group, uniform) = bind_group(ctx, params, &queries, &shard.buffer, &ws).await?;
            uniforms.push(uniform);
            let grid = ctx.grid("chunks of one search shard", rows.div_ceil(CHUNK), 1)?;
            shard_groups.push((group, grid));
            chunk_base += rows.div_ceil(CHUNK);
        }
        let (rescore_groups, rescore_pipeline, _fqueries) = self.rescore_groups(ctx, base, rescore, q0, nq, &ws, &mut uniforms).await?;
        let pipe = |k| ctx.pipeline(ShaderId::Search(k), (256, 1));
        let (hist, select, ties, scan, collect, sort) = (
            pipe(SearchKernel::Hist).await?,
            pipe(SearchKernel::Select).await?,
            pipe(SearchKernel::Ties).await?,
            pipe(SearchKernel::Scan).await?,
            pipe(SearchKernel::Collect).await?,
            pipe(SearchKernel::Sort).await?,
        );

        // Counters start at zero; result slots start as a sentinel no kernel writes, so a slot
        // left unwritten is caught below instead of passing for row 0.
        ctx.queue.write_buffer(&ws, 4 * off_out, bytemuck::cast_slice(&vec![UNWRITTEN; (nq64 * seg * 2) as usize]));
        let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo search") });
        encoder.clear_buffer(&ws, 0, Some(4 * off_out));
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("edo search"), timestamp_writes: None });
            let per_shard = |pass: &mut wgpu::ComputePass<'_>, pipeline: &wgpu::ComputePipeline| {
                pass.set_pipeline(pipeline);
                for (group, (gx, gy)) in &shard_groups {
                    pass.set_bind_group(0, group, &[]);
                    pass.dispatch_workgroups(*gx, *gy, nq as u32);
                }
            };
            let first = &shard_groups[0].0;
            per_shard(&mut pass, &hist);
            pass.set_pipeline(&select);
            pass.set_bind_group(0, first, &[]);
            pass.dispatch_workgroups(nq.div_ceil(64) as u32, 1, 1);
            per_shard(&mut pass, &ties);
            pass.set_pipeline(&scan);
            pass.set_bind_group(0, first, &[]);
            pass.dispatch_workgroups(nq as u32, 1, 1);
            per_shard(&mut pass, &collect);
            if let Some(p) = &rescore_pipeline {
                pass.set_pipeline(p);
                for group in &rescore_groups {
                    pass.set_bind_group(0, group, &[]);
                    pass.dispatch_workgroups(kc.div_ceil(64) as u32, nq as u32, 1);
                }
            }
            pass.set_pipeline(&sort);
            pass.set_bind_group(0, first, &[]);
            pass.dispatch_workgroups(nq as u32, 1, 1);
        }
        super::checked_submit(ctx, "hamming search submission", || {
            ctx.queue.submit([encoder.finish()]);
            Ok(())
        })
        .await?;
        drop(uniforms); // submitted: the work keeps what it reads
        let words: Vec<u32> = super::read_buffer(ctx, &ws, 4 * off_out, (nq64 * seg * 2) as usize).await?;
        let pairs: Vec<(u32, u32)> = words.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        for q in 0..nq {
            if pairs[q * seg as usize..][..kc].iter().any(|&(_, id)| id == UNWRITTEN) {
                return Err(Error::gpu("hamming search", format!("query {}: a result slot was never written", q0 + q)));
            }
        }
        Ok(pairs)
    }
}

/// Pairs per query of the one-pass kernels' two scratch lists: the blocks' (`blocks × k`, none
/// for a single block, which writes the results directly) and the first merge's.
fn topk_lists(blocks: u64, k: u64, block: u64) -> (u64, u64) {
    let a = if blocks > 1 { blocks * k } else { 0 };
    let b = if a > block { a.div_ceil(block) * k } else { 0 };
    (a, b)
}

/// A search bind group (any search kernel's: `SearchParams` or `TopkParams`) and its parameters'
/// buffer, which must outlive the submission (a buffer is destroyed when its last handle goes,
/// and a bind group is not one).
async fn bind_group<P: bytemuck::Pod>(
    ctx: &Context,
    params: P,
    input: &wgpu::Buffer,
    shard: &wgpu::Buffer,
    ws: &wgpu::Buffer,
) -> Result<(wgpu::BindGroup, super::Buffer), Error> {
    let bytes = bytemuck::bytes_of(&params);
    let uniform = ctx.pooled("search params", bytes.len() as u64, wgpu::BufferUsages::UNIFORM, Some(bytes), super::Fit::Class).await?;
    let group = ctx.bind_group(
        "edo search",
        &ctx.gather_layout,
        &[uniform.as_entire_binding(), buffer_range(input, 0, input.size()), shard.as_entire_binding(), ws.as_entire_binding()],
    );
    Ok((group, uniform))
}

/// The score a `rescore.wgsl` key stands for (the inverse of `descending_key`).
fn score_of_key(key: u32) -> f32 {
    let ordered = !key;
    f32::from_bits(if ordered & 0x8000_0000 != 0 { ordered & 0x7fff_ffff } else { !ordered })
}

impl Reupload for GpuCodes {
    type Host = PackedTable;
    async fn reupload(engine: &Engine, host: &PackedTable, _: Option<&Self>) -> Result<Self, Error> {
        GpuCodes::upload(engine, host).await
    }
}

impl Placeable for GpuCodes {
    type Cpu = PackedTable;
    fn place_cpu(host: PackedTable) -> Result<PackedTable, Error> {
        crate::search::check_corpus(host.format(), host.dim())?;
        Ok(host)
    }
    fn cpu_host(cpu: &PackedTable) -> &PackedTable {
        cpu
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;
    use crate::gpu::ShaderId;

    #[test]
    fn parameter_structs_match_their_wgsl_field_by_field() {
        edo_gpu::assert_wgsl_layout!(
            ShaderId::Search(crate::gpu::SearchKernel::Hist),
            SearchParams {
                n_queries,
                code_words,
                corpus_row_words,
                query_row_words,
                bins,
                k,
                seg,
                chunks,
                shard_first,
                shard_rows,
                chunk_base,
                dim,
                off_hist,
                off_sel,
                off_ties,
                off_out,
                table_row_words,
                table_code_words,
                _pad
            }
        );
        edo_gpu::assert_wgsl_layout!(
            ShaderId::Search(crate::gpu::SearchKernel::TopkScan),
            TopkParams {
                n_queries,
                code_words,
                corpus_row_words,
                query_row_words,
                bins,
                k,
                tile,
                shard_first,
                shard_rows,
                block_base,
                in_len,
                off_in,
                off_out,
                out_stride,
                pad_to,
                _pad0
            }
        );
    }
}
