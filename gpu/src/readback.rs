//! Submitting work under a validation scope and reading buffers back to the host.

use super::*;
use edo_core::Error as CoreError;

/// Runs `submit` (which queues work on `ctx`'s queue) inside a validation error scope, so that a
/// submission wgpu refuses — a bug in edo, or a buffer destroyed under it — is [`Error::Gpu`]
/// rather than an output that was never written. (Natively such an error would otherwise reach
/// the device's handler; in a browser it would be lost among the page's own.)
pub async fn checked_submit(ctx: &Context, what: &'static str, submit: impl FnOnce() -> Result<(), Error>) -> Result<(), Error> {
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let submitted = submit();
    // Popped at once (the scope covers the submission only); its answer is awaited below.
    let refused = scope.pop();
    submitted?;
    match refused.await {
        Some(e) => {
            ctx.check_lost()?;
            Err(Error::Gpu { what, message: e.to_string(), source: Some(crate::Cause::new(e)) })
        }
        None => Ok(()),
    }
}

/// Copies `len` values at byte `offset` of `buffer` (a `COPY_SRC` buffer) back to the host once
/// all work submitted before has finished. The host vector is allocated fallibly: a readback
/// larger than host (or WASM) memory is [`edo_core::Error::HostOutOfMemory`].
pub async fn read_buffer<T: bytemuck::Pod>(ctx: &Context, buffer: &wgpu::Buffer, offset: u64, len: usize) -> Result<Vec<T>, Error> {
    ctx.check_lost()?;
    let size = len as u64 * std::mem::size_of::<T>() as u64;
    if size == 0 {
        return Ok(Vec::new());
    }
    let out = host_vec::<T>(len)?;
    let staging = readback_buffer(ctx, size).await?;
    let mut encoder = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("edo readback") });
    encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
    ctx.queue.submit([encoder.finish()]);
    map_read(ctx, &staging, out, len).await
}

/// An empty host vector with room for `len` values, allocated fallibly.
pub fn host_vec<T>(len: usize) -> Result<Vec<T>, Error> {
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(len).map_err(|_| CoreError::HostOutOfMemory { what: "readback", bytes: (len * std::mem::size_of::<T>()) as u64 })?;
    Ok(out)
}

/// A buffer to copy `size` bytes into and map for reading (pooled).
pub async fn readback_buffer(ctx: &Context, size: u64) -> Result<Buffer, Error> {
    ctx.pooled("readback", size, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST, None, Fit::Class).await
}

/// The first `len` values of `staging` into `out` (empty, with room for them), once the work
/// already submitted that copies them there has finished.
pub async fn map_read<T: bytemuck::Pod>(ctx: &Context, staging: &Buffer, mut out: Vec<T>, len: usize) -> Result<Vec<T>, Error> {
    let size = len as u64 * std::mem::size_of::<T>() as u64;
    // Out of the pool until it is unmapped: a read given up half-way (its future dropped in a
    // browser) must not hand a buffer still mapping to the next lookup.
    staging.keep_out_of_pool(true);
    let (tx, rx) = crate::oneshot::channel();
    staging.slice(..size).map_async(wgpu::MapMode::Read, move |r| tx.send(r));
    ctx.poll_wait()?;
    match rx.await {
        Some(Ok(())) => {}
        Some(Err(e)) => return Err(ctx.check_lost().err().unwrap_or(Error::Readback { message: e.to_string(), source: Some(crate::Cause::new(e)) })),
        None => return Err(ctx.check_lost().err().unwrap_or(Error::Readback { message: "map callback dropped".into(), source: None })),
    }
    let view = staging
        .slice(..size)
        .get_mapped_range()
        .map_err(|e| ctx.check_lost().err().unwrap_or(Error::Readback { message: e.to_string(), source: Some(crate::Cause::new(e)) }))?;
    // Byte for byte into the values: a mapped range need not be aligned for T.
    out.resize(len, T::zeroed());
    bytemuck::cast_slice_mut::<T, u8>(&mut out).copy_from_slice(&view);
    drop(view);
    // (A mapped buffer may be dropped as it is; unmapping one the device took away is an error.)
    if ctx.check_lost().is_ok() {
        staging.unmap();
        staging.keep_out_of_pool(false);
    }
    Ok(out)
}
