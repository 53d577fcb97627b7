//! Every kernel parsed and validated by naga, with its override constants applied as edo applies
//! them, and written out for every backend wgpu targets: SPIR-V (Vulkan), MSL (Metal), HLSL (DX12)
//! and GLSL. Needs no GPU.

use edo_core::Format;
use edo_gpu::{Decoder, ShaderId, Shape};
use naga::back::PipelineConstants;
use naga::valid::{Capabilities, ValidationFlags, Validator};
use std::collections::HashSet;

use edo_gpu::decoders::{has_wide_reads, WgslDecoder};

/// `format`'s GPU decoder (every format has one).
fn wgsl_of(format: Format) -> WgslDecoder {
    edo_gpu::decoders::decoder(format).unwrap_or_else(|| panic!("{format}: no GPU decoder"))
}

include!("../src/wgsl_min.rs");

/// The override values the engine uses: every workgroup shape it makes, as the kernel's shape
/// takes them, with the kernel's own constants.
fn variants(shader: ShaderId) -> Vec<PipelineConstants> {
    let shapes: &[(u32, u32)] = match shader.kernel().0.shape {
        Shape::Fixed(_) => &[(1, 1)],
        Shape::Rows | Shape::Flat => &[(1, 256), (4, 64), (32, 8)],
    };
    shapes.iter().map(|&shape| shader.constants_for(shape).into_iter().map(|(k, v)| (k.to_string(), v)).collect()).collect()
}

/// The browser build ships the kernels without comments and indentation (build.rs): each still
/// validates, to the same module (the same functions, types, constants and workgroup size).
#[test]
fn every_shader_validates_as_the_browser_build_ships_it() {
    for shader in ShaderId::all() {
        let (source, stripped) = (shader.source(), strip_wgsl(&shader.source()));
        assert!(stripped.len() < source.len(), "{}: nothing stripped", shader.name());
        let parse = |text: &str| {
            let module = naga::front::wgsl::parse_str(text).unwrap_or_else(|e| panic!("{}: {}", shader.name(), e.emit_to_string(text)));
            Validator::new(ValidationFlags::all(), Capabilities::all())
                .validate(&module)
                .unwrap_or_else(|e| panic!("{} (stripped): {}", shader.name(), e.emit_to_string(text)));
            module
        };
        let (a, b) = (parse(&source), parse(&stripped));
        assert_eq!(a.functions.len(), b.functions.len(), "{}", shader.name());
        assert_eq!(a.types.len(), b.types.len(), "{}", shader.name());
        assert_eq!(a.overrides.len(), b.overrides.len(), "{}", shader.name());
        assert_eq!(a.global_variables.len(), b.global_variables.len(), "{}", shader.name());
        assert_eq!(a.entry_points[0].workgroup_size, b.entry_points[0].workgroup_size, "{}", shader.name());
    }
}

#[test]
fn every_shader_validates_and_translates_to_every_backend() {
    for shader in ShaderId::all() {
        let source = shader.source();
        let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| panic!("{}: {}", shader.name(), e.emit_to_string(&source)));
        let info = Validator::new(ValidationFlags::all(), Capabilities::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}", shader.name(), e.emit_to_string(&source)));
        assert_eq!(module.entry_points.len(), 1, "{}: one entry point", shader.name());
        for constants in variants(shader) {
            let ep = (naga::ShaderStage::Compute, "main");
            let (module, info) = naga::back::pipeline_constants::process_overrides(&module, &info, Some(ep), &constants)
                .unwrap_or_else(|e| panic!("{} {constants:?}: {e}", shader.name()));
            let wg = module.entry_points[0].workgroup_size;
            let mut layouter = naga::proc::Layouter::default();
            layouter.update(module.to_ctx()).unwrap();
            let shared: u32 = module
                .global_variables
                .iter()
                .filter(|&(h, v)| v.space == naga::AddressSpace::WorkGroup && !info.get_entry_point(0)[h].is_empty())
                .map(|(_, v)| layouter[v.ty].size.next_multiple_of(16))
                .sum();
            // The workgroup memory the kernel uses, at most what the engine asks of every device
            // (REQUIRED_LIMITS): WebGPU's and Vulkan's minimum.
            assert!(shared <= 16384, "{}: {shared} bytes of workgroup memory", shader.name());
            let want = match shader.kernel().0.shape {
                Shape::Fixed(size) => size as f64,
                Shape::Flat => constants["WG"],
                Shape::Rows => constants["WG_X"] * constants["WG_Y"],
            };
            assert_eq!(wg[0] as f64 * wg[1] as f64, want, "{}", shader.name());

            let spv = naga::back::spv::write_vec(&module, &info, &Default::default(), None).unwrap_or_else(|e| panic!("{} SPIR-V: {e}", shader.name()));
            assert_eq!(spv[0], 0x0723_0203, "SPIR-V magic");

            let msl_pipeline = naga::back::msl::PipelineOptions { entry_point: Some((ep.0, ep.1.to_string())), ..Default::default() };
            // wgpu's Metal backend targets MSL 2.1 or newer on every device it supports.
            let msl_options = naga::back::msl::Options { lang_version: (2, 1), ..Default::default() };
            let (msl, _) = naga::back::msl::write_string(&module, &info, &msl_options, &msl_pipeline).unwrap_or_else(|e| panic!("{} MSL: {e}", shader.name()));
            assert!(msl.contains("kernel void"), "{} MSL has a kernel", shader.name());

            let mut hlsl = String::new();
            let hlsl_pipeline = naga::back::hlsl::PipelineOptions { entry_point: Some((ep.0, ep.1.to_string())) };
            naga::back::hlsl::Writer::new(&mut hlsl, &Default::default(), &hlsl_pipeline)
                .write(&module, &info, None)
                .unwrap_or_else(|e| panic!("{} HLSL: {e}", shader.name()));
            assert!(hlsl.contains("[numthreads("), "{} HLSL has numthreads", shader.name());

            let mut glsl = String::new();
            let glsl_options = naga::back::glsl::Options { version: naga::back::glsl::Version::Desktop(450), ..Default::default() };
            let glsl_pipeline =
                naga::back::glsl::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".to_string(), multiview: None };
            naga::back::glsl::Writer::new(&mut glsl, &module, &info, &glsl_options, &glsl_pipeline, Default::default())
                .and_then(|mut w| w.write())
                .unwrap_or_else(|e| panic!("{} GLSL: {e}", shader.name()));
            assert!(glsl.contains("layout(local_size_x"), "{} GLSL has a local size", shader.name());
        }
    }
}

/// Each shader file starts with a comment stating its layout; only the drivers declare bindings
/// and entry points (STYLE: shaders document their bindings; helpers have none, but for those
/// that hold the bindings a family of drivers shares, or a driver's shard in another type).
#[test]
fn shader_files_document_their_layout() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shaders");
    let mut drivers = 0;
    let (mut decoders, mut wide_decoders) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(text.starts_with("//"), "{name} starts with a comment");
        let has_bindings = text.contains("@binding") || text.contains("@compute");
        if text.contains("@compute") {
            assert!(text.contains("// Bindings:"), "{name} is a driver and documents its bindings");
            drivers += 1;
        } else if [
            "hamming_common.wgsl",
            "gather_driver.wgsl",
            "gather_shard.wgsl",
            "gather_shard4.wgsl",
            "bag_shard.wgsl",
            "bag_shard4.wgsl",
            "topk_common.wgsl",
            "topk_rows.wgsl",
            "topk_rows4.wgsl",
        ]
        .contains(&name.as_str())
        {
            assert!(text.contains("// Bindings:"), "{name} declares the bindings its kernels share");
        } else {
            assert!(!has_bindings, "{name} is helpers only");
            // decode_f32_bag4.wgsl is the FP32 vec4 bag's own decoder, a kernel's helper.
            if name.starts_with("decode_") && name != "decode_f32_bag4.wgsl" {
                *(if name.ends_with("_16.wgsl") { &mut wide_decoders } else { &mut decoders }) += 1;
            }
        }
    }
    // The files on disk are exactly the kernel table's drivers and the formats' decoders.
    let kernels: Vec<_> = ShaderId::all().into_iter().map(|s| s.kernel().0).collect();
    let listed_drivers: HashSet<&str> = kernels.iter().map(|k| k.driver.text()).collect();
    let listed_decoders: HashSet<&str> = Format::ALL.iter().map(|&f| wgsl_of(f).wgsl).collect();
    assert_eq!(drivers, listed_drivers.len(), "every driver file is a kernel's, and every kernel's driver is a file");
    assert_eq!(decoders, listed_decoders.len(), "every decoder file is a format's, and every format's decoder is a file");
    let listed_wide: HashSet<&str> = Format::ALL.iter().filter_map(|&f| wgsl_of(f).wide).collect();
    assert_eq!(wide_decoders, listed_wide.len(), "every decode_*_16.wgsl is a format's 16-byte reads, and each of those a file");
    // Every kernel that decodes words gets each decoder but one: the vec4 gather of FP32 is its
    // own driver, with 16-byte loads and no decoder.
    let all = ShaderId::all();
    let decoder = |s: &ShaderId| s.kernel().0.decoder;
    let word_pairs: HashSet<(&str, &str)> =
        all.iter().filter(|s| decoder(s) == Decoder::Words).map(|s| (s.kernel().0.driver.text(), wgsl_of(s.format().unwrap()).wgsl)).collect();
    let word_drivers: HashSet<&str> = kernels.iter().filter(|k| k.decoder == Decoder::Words).map(|k| k.driver.text()).collect();
    assert_eq!(word_pairs.len(), word_drivers.len() * listed_decoders.len() - 1);
    assert_eq!(ShaderId::Gather { format: Format::F32, vec4: true }.kernel().0.driver, edo_gpu::Src::GatherRows4F32);
    // Every format with 16-byte reads has a gather and a bag that use them (FP16's gather unpacks
    // its rows itself: gather_rows8_f16.wgsl, no decoder).
    for f in Format::ALL.iter().filter(|&&f| has_wide_reads(f)) {
        let (gather, bag) = (ShaderId::GatherWide { format: *f }, ShaderId::BagWide { format: *f });
        assert!(all.contains(&gather) && all.contains(&bag), "{f}");
        assert_eq!(decoder(&bag), Decoder::Wide);
        assert_eq!(decoder(&gather), if *f == Format::F16 { Decoder::None } else { Decoder::Wide }, "{f}");
        assert!(bag.source().contains(wgsl_of(*f).wide.unwrap()));
    }
    // The sources are all (driver, helpers, decoder) triples, each assembled differently (bag's
    // vec4 variant and binary+scale are override constants, not sources): a kernel that reads its
    // shard as 16-byte words binds it through other helpers (gather_shard4.wgsl, bag_shard4.wgsl).
    let triples: HashSet<(&str, &[edo_gpu::Src], Vec<&str>)> = all
        .iter()
        .map(|s| {
            let decoders = match (decoder(s), s.format()) {
                (Decoder::Words, Some(f)) => vec![wgsl_of(f).wgsl],
                (Decoder::Wide, Some(f)) => vec![wgsl_of(f).wgsl, wgsl_of(f).wide.unwrap()],
                _ => vec![],
            };
            (s.kernel().0.driver.text(), s.kernel().0.helpers, decoders)
        })
        .collect();
    let sources: HashSet<String> = all.iter().map(|s| s.source()).collect();
    assert_eq!(sources.len(), triples.len());
    use edo_gpu::Src;
    assert_eq!(
        ShaderId::Bag { format: Format::F32, vec4: true }.kernel().0.helpers,
        &[Src::GatherCommon, Src::BagShard4, Src::DecodeF32Bag4, Src::BagDecode16]
    );
    assert_eq!(ShaderId::BagWide { format: Format::Int8 }.kernel().0.helpers, &[Src::GatherCommon, Src::BagShard4]);
    assert_eq!(ShaderId::Search(edo_gpu::SearchKernel::TopkScan4).kernel().0.helpers, &[Src::TopkCommon, Src::TopkRows4]);
}

/// WGSL forbids constant expressions that produce an infinity or a NaN; naga lets them through,
/// Chrome's compiler (Tint) rejects the module. No kernel may hold one.
#[test]
fn no_constant_infinities_or_nans() {
    for shader in ShaderId::all() {
        let src = shader.source().to_ascii_lowercase();
        for bits in ["0x7f800000", "0xff800000", "0x7fc00000", "0xffc00000"] {
            assert!(!src.contains(&format!("bitcast<f32>({bits}")), "{}: bitcast<f32>({bits}) is a constant ±inf or NaN", shader.name());
        }
        assert!(!src.contains("3.40282347e+38") && !src.contains("3.40282347e38"), "{}: a literal past f32's largest finite value", shader.name());
    }
}

/// The u32 loads in a kernel's SPIR-V, by width: `(4-byte u32 loads — of ids, parameters and
/// locals too —, 16-byte vec4<u32> reads)`. naga keeps functions, so a 16-byte load inside a
/// helper (`quad()`) counts once per call of that helper: the reads the source makes. (SPIR-V's
/// words: an instruction's first word holds its length in the high half and its opcode in the
/// low; OpTypeInt = 21, OpTypeVector = 23, OpFunction = 54, OpFunctionCall = 57, OpLoad = 61.)
fn u32_loads(shader: ShaderId) -> (usize, usize) {
    let (module, info) = specialised(&shader.source(), &at_32x8(shader));
    let spv = naga::back::spv::write_vec(&module, &info, &Default::default(), None).unwrap();
    let (mut uint, mut uint4, mut loads) = (HashSet::new(), HashSet::new(), Vec::new());
    let (mut function, mut calls) = (0, Vec::new());
    let mut at = 5;
    while at < spv.len() {
        let (len, op) = ((spv[at] >> 16) as usize, spv[at] & 0xffff);
        let w = &spv[at..at + len];
        match op {
            21 if w[2] == 32 && w[3] == 0 => drop(uint.insert(w[1])),
            23 if uint.contains(&w[2]) && w[3] == 4 => drop(uint4.insert(w[1])),
            54 => function = w[2],
            57 => calls.push(w[3]),
            61 => loads.push((w[1], function)),
            _ => {}
        }
        at += len.max(1);
    }
    let reads = |f: u32| match calls.iter().filter(|&&c| c == f).count() {
        0 => 1, // the entry point
        n => n,
    };
    (loads.iter().filter(|(t, _)| uint.contains(t)).count(), loads.iter().filter(|(t, _)| uint4.contains(t)).map(|&(_, f)| reads(f)).sum())
}

/// Issue 32: an FP32 row is read with one 16-byte load per lane and step — in naga's SPIR-V (one
/// vec4<u32> load, against none in the one-value driver) and in its MSL (a `uint4` read of the
/// shard) — while the formats that decode read u32 words.
#[test]
fn the_fp32_gather_reads_16_bytes_per_load() {
    let wide = ShaderId::Gather { format: Format::F32, vec4: true };
    assert_eq!(u32_loads(wide).1, 1, "one vec4<u32> load: the quad of a step");
    assert_eq!(u32_loads(ShaderId::Gather { format: Format::F32, vec4: false }).1, 0);
    assert_eq!(u32_loads(ShaderId::Gather { format: Format::Int8, vec4: true }).1, 0, "INT8 rows are 4-byte words yet");
    // The vec4 bag of FP32: its decoder reads a row's quad with one 16-byte load (naga keeps
    // functions, so the four rows a step calls it for are one load in the SPIR-V; POOL_NONE's
    // one-value read is a u32 of the same binding); the other formats' bags read u32 words.
    let bag = ShaderId::Bag { format: Format::F32, vec4: true };
    assert_eq!(u32_loads(bag).1, 1, "decode4: one vec4<u32> load");
    assert_eq!(u32_loads(ShaderId::Bag { format: Format::F32, vec4: false }).1, 0);
    assert_eq!(u32_loads(ShaderId::Bag { format: Format::Int8, vec4: true }).1, 0);

    let msl = msl_of(wide);
    let reads: Vec<&str> = msl.lines().filter(|l| l.contains("shard4")).collect();
    assert!(reads.iter().any(|l| l.contains("uint4") || l.contains("as_type<metal::float4>")), "{msl}");
}

/// Issue 32: rows of 8-bit codes aligned to 16 bytes (INT8, FP8, q8_0) are read sixteen codes a
/// load, FP16 rows eight halves a load — in naga's SPIR-V the gather's step and the bag's
/// decode16 are one vec4<u32> load (FP16's bag: two), against none for the same formats' kernels
/// over rows of 4-byte words; in MSL those reads are `uint4`s. (A decoder's other reads, a row's
/// scale and bias, are u32s of the same 16-byte binding.)
#[test]
fn aligned_rows_read_16_bytes_per_load() {
    let wide = [Format::F16, Format::Int8, Format::Q8_0, Format::Fp8E4M3, Format::Fp8E5M2];
    assert_eq!(Format::ALL.iter().filter(|&&f| has_wide_reads(f)).copied().collect::<Vec<_>>(), wide);
    for format in wide {
        let (gather, bag) = (ShaderId::GatherWide { format }, ShaderId::BagWide { format });
        assert_eq!(u32_loads(gather).1, 1, "{format}: one vec4<u32> load a step");
        assert_eq!(u32_loads(bag).1, if format == Format::F16 { 2 } else { 1 }, "{format}: decode16's vec4<u32> loads");
        // The same format's kernels over rows of words load u32s only.
        let (narrow_gather, narrow_bag) = (ShaderId::Gather { format, vec4: true }, ShaderId::Bag { format, vec4: true });
        assert_eq!((u32_loads(narrow_gather).1, u32_loads(narrow_bag).1), (0, 0), "{format}");
        for shader in [gather, bag] {
            let msl = msl_of(shader);
            let reads: Vec<&str> = msl.lines().filter(|l| l.contains("uint4") && l.contains("shard4")).collect();
            assert!(!reads.is_empty(), "{}: {msl}", shader.name());
        }
    }
}

/// A kernel's override constants for a 32 × 8 workgroup.
fn at_32x8(shader: ShaderId) -> PipelineConstants {
    shader.constants_for((32, 8)).into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `source` parsed, validated and its overrides set to `constants`, for the `main` entry point.
fn specialised(source: &str, constants: &PipelineConstants) -> (naga::Module, naga::valid::ModuleInfo) {
    let module = naga::front::wgsl::parse_str(source).unwrap();
    let info = Validator::new(ValidationFlags::all(), Capabilities::all()).validate(&module).unwrap();
    let (module, info) = naga::back::pipeline_constants::process_overrides(&module, &info, Some((naga::ShaderStage::Compute, "main")), constants).unwrap();
    (module.into_owned(), info.into_owned())
}

/// naga's MSL of a kernel, its overrides at a 32 × 8 workgroup's values.
fn msl_of(shader: ShaderId) -> String {
    let (module, info) = specialised(&shader.source(), &at_32x8(shader));
    let pipeline = naga::back::msl::PipelineOptions { entry_point: Some((naga::ShaderStage::Compute, "main".to_string())), ..Default::default() };
    naga::back::msl::write_string(&module, &info, &naga::back::msl::Options { lang_version: (2, 1), ..Default::default() }, &pipeline).unwrap().0
}

/// Issue 33: the one-pass search scan over rows of whole vec4s reads four code words with one
/// 16-byte load (every read of the shard in its MSL a `uint4`), while the word-at-a-time scan
/// reads the shard as `uint`s.
#[test]
fn the_search_scan_over_vec4_rows_reads_16_bytes_per_load() {
    use edo_gpu::SearchKernel;
    let (scan, scan4) = (ShaderId::Search(SearchKernel::TopkScan), ShaderId::Search(SearchKernel::TopkScan4));
    let msl = msl_of(scan4);
    let reads: Vec<&str> = msl.lines().filter(|l| l.contains("= shard4_[")).collect();
    assert!(!reads.is_empty() && reads.iter().all(|l| l.contains("uint4")), "{reads:#?}");
    assert!(!msl_of(scan).contains("shard4"));
    // In the SPIR-V: fewer u32 loads (the shard's, in the wide and narrow loops, are gone).
    let (words, words4) = (u32_loads(scan).0, u32_loads(scan4).0);
    assert!(words4 < words, "u32 loads: {words} against {words4}");
}

/// Private (function-scope) arrays in a kernel's SPIR-V, by the words of its instructions: an
/// OpVariable (59) in the Function (7) or Private (6) storage class whose pointer type (OpTypePointer,
/// 32) points at an OpTypeArray (28). A compiler puts such an array, indexed at run time, in local
/// memory: slow on every GPU.
fn private_arrays(shader: ShaderId) -> usize {
    private_arrays_in(&shader.source(), &at_32x8(shader))
}

fn private_arrays_in(source: &str, constants: &PipelineConstants) -> usize {
    let (module, info) = specialised(source, constants);
    let spv = naga::back::spv::write_vec(&module, &info, &Default::default(), None).unwrap();
    let (mut arrays, mut pointers, mut count) = (HashSet::new(), HashSet::new(), 0);
    let mut at = 5;
    while at < spv.len() {
        let (len, op) = ((spv[at] >> 16) as usize, spv[at] & 0xffff);
        let w = &spv[at..at + len];
        match op {
            28 => drop(arrays.insert(w[1])),
            32 if matches!(w[2], 6 | 7) && arrays.contains(&w[3]) => drop(pointers.insert(w[1])),
            59 if pointers.contains(&w[1]) => count += 1,
            _ => {}
        }
        at += len.max(1);
    }
    count
}

/// Issue 33: the one-pass search kernels hold a block's entries (up to 16 an invocation) as named
/// values, not a private array.
#[test]
fn the_one_pass_search_keeps_no_private_arrays() {
    use edo_gpu::SearchKernel as K;
    for k in [K::TopkScan, K::TopkScan4, K::TopkMerge, K::TopkScanLong, K::TopkScan4Long, K::TopkMergeLong] {
        assert_eq!(private_arrays(ShaderId::Search(k)), 0, "{k:?}");
    }
}

/// Issue 32: no bag or gather kernel keeps a private array (the bag's accumulators are four named
/// values), for every format. The check finds one where there is one: a WGSL function array.
#[test]
fn bags_and_gathers_keep_no_private_arrays() {
    for shader in ShaderId::all() {
        if matches!(
            shader,
            ShaderId::Bag { .. } | ShaderId::Gather { .. } | ShaderId::GatherF16 { .. } | ShaderId::GatherWide { .. } | ShaderId::BagWide { .. }
        ) {
            assert_eq!(private_arrays(shader), 0, "{}", shader.name());
        }
    }
    let indexed = "@group(0) @binding(0) var<storage, read_write> o: array<f32>;
        @compute @workgroup_size(1) fn main(@builtin(local_invocation_index) i: u32) {
            var a: array<f32, 4>; a[i & 3u] = 1.0; o[i] = a[3u - (i & 3u)]; }";
    assert_eq!(private_arrays_in(indexed, &Default::default()), 1);
}
