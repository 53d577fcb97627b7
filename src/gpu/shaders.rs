//! The WGSL sources, one enum variant per kernel; the variant is the pipeline cache key.

use crate::format::Format;

/// Every compute kernel edo runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShaderId {
    GatherF32,
    GatherF16,
    GatherInt8,
    GatherInt4,
    /// Binary and scaled binary share one source; `SCALED` is an override constant.
    GatherBinary,
}

const GATHER_COMMON: &str = include_str!("../../shaders/gather_common.wgsl");

impl ShaderId {
    /// Every kernel, for tests that validate them all.
    pub const ALL: [ShaderId; 5] =
        [ShaderId::GatherF32, ShaderId::GatherF16, ShaderId::GatherInt8, ShaderId::GatherInt4, ShaderId::GatherBinary];

    /// The gather kernel of a format.
    pub fn gather(format: Format) -> ShaderId {
        match format {
            Format::F32 => ShaderId::GatherF32,
            Format::F16 => ShaderId::GatherF16,
            Format::Int8 => ShaderId::GatherInt8,
            Format::Int4 => ShaderId::GatherInt4,
            Format::Binary | Format::BinaryScaled => ShaderId::GatherBinary,
        }
    }

    /// A short name for labels and error messages.
    pub fn name(self) -> &'static str {
        match self {
            ShaderId::GatherF32 => "gather_f32",
            ShaderId::GatherF16 => "gather_f16",
            ShaderId::GatherInt8 => "gather_int8",
            ShaderId::GatherInt4 => "gather_int4",
            ShaderId::GatherBinary => "gather_binary",
        }
    }

    /// The complete WGSL module: shared helpers followed by the kernel.
    pub fn source(self) -> String {
        let kernel = match self {
            ShaderId::GatherF32 => include_str!("../../shaders/gather_f32.wgsl"),
            ShaderId::GatherF16 => include_str!("../../shaders/gather_f16.wgsl"),
            ShaderId::GatherInt8 => include_str!("../../shaders/gather_int8.wgsl"),
            ShaderId::GatherInt4 => include_str!("../../shaders/gather_int4.wgsl"),
            ShaderId::GatherBinary => include_str!("../../shaders/gather_binary.wgsl"),
        };
        [GATHER_COMMON, kernel].concat()
    }
}
