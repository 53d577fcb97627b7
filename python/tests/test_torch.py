"""edo.torch against PyTorch's own modules, where PyTorch is installed (it is not a dependency,
and CI does not install it: there these tests say SKIPPED)."""

from __future__ import annotations

import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - CI has no torch
    print("SKIPPED: edo.torch (PyTorch is not installed)")
    pytest.skip("SKIPPED: PyTorch is not installed", allow_module_level=True)

import edo
import edo.torch

torch.manual_seed(0)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_follows_pytorchs_module(mode, padding_idx, include_last_offset):
    ref = torch.nn.EmbeddingBag(500, 24, mode=mode, padding_idx=padding_idx, include_last_offset=include_last_offset).eval()
    ours = edo.torch.EmbeddingBag.from_float(ref, format="fp32")
    g = torch.Generator().manual_seed(1)
    # 1-D input with offsets (empty bags and padding entries among them), then 2-D input.
    input = torch.randint(0, 500, (200,), generator=g)
    input[::7] = 3
    offsets = torch.tensor([0, 0, 10, 11, 90, 150, 199] + ([200] if include_last_offset else []))
    with torch.no_grad():
        np.testing.assert_allclose(ours(input, offsets).numpy(), ref(input, offsets).numpy(), rtol=1e-5, atol=1e-6)
        if not include_last_offset:
            two = input[:180].reshape(12, 15)
            np.testing.assert_allclose(ours(two).numpy(), ref(two).numpy(), rtol=1e-5, atol=1e-6)
        if mode == "sum":
            w = torch.rand(200, generator=g)
            np.testing.assert_allclose(ours(input, offsets, w).numpy(), ref(input, offsets, w).numpy(), rtol=1e-5, atol=1e-6)


def test_int8_modules_equal_pytorch_over_the_dequantized_weights():
    ref = torch.nn.EmbeddingBag(1000, 64, mode="mean").eval()
    ours = edo.torch.EmbeddingBag.from_float(ref, format="int8")
    assert ours.table.format == "int8" and ours.table.nbytes < 1000 * 64 * 4 / 3
    deq = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(ours.table.dequantize()), mode="mean")
    input, offsets = torch.randint(0, 1000, (300,)), torch.arange(0, 300, 10)
    with torch.no_grad():
        np.testing.assert_allclose(ours(input, offsets).numpy(), deq(input, offsets).numpy(), rtol=1e-5, atol=1e-6)
    emb = torch.nn.Embedding(1000, 64).eval()
    small = edo.torch.Embedding.from_float(emb)
    ids = torch.randint(0, 1000, (4, 9))
    out = small(ids)
    assert isinstance(out, torch.Tensor) and out.shape == (4, 9, 64) and out.dtype == torch.float32
    with torch.no_grad():
        assert (out - emb(ids)).abs().max() < 0.02


def test_what_edo_cannot_run_is_refused():
    with pytest.raises(ValueError, match="max_norm"):
        edo.torch.EmbeddingBag.from_float(torch.nn.EmbeddingBag(10, 4, max_norm=1.0))
    with pytest.raises(TypeError):
        edo.torch.Embedding.from_float(np.zeros((3, 4)))  # type: ignore[arg-type]
    with pytest.raises(edo.IdOutOfRangeError):
        edo.torch.Embedding.from_float(torch.nn.Embedding(10, 4))(torch.tensor([10]))
