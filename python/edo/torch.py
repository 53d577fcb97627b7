"""edo's tables as PyTorch inference modules: ``nn.Embedding`` and ``nn.EmbeddingBag`` with their
weights stored compressed (INT8 by default), their ``forward`` following PyTorch's conventions and
returning CPU tensors that share the memory edo wrote (no copy). For inference: no gradients.

    import torch, edo.torch
    bag = torch.nn.EmbeddingBag(100_000, 128, mode="mean")
    small = edo.torch.EmbeddingBag.from_float(bag, format="int8")   # about a quarter of the memory
    out = small(input, offsets)                                       # as bag(input, offsets)

PyTorch is not a dependency of edo: importing this module needs it installed.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np
import torch
from numpy.typing import NDArray

from . import Table, _invalid, quantize

__all__ = ["Embedding", "EmbeddingBag"]


def _numpy(t: Optional[torch.Tensor]) -> Optional[NDArray[Any]]:
    return None if t is None else t.detach().cpu().numpy()


def _weight(module_or_weight: Union[torch.nn.Module, torch.Tensor], kind: type) -> Tuple[torch.Tensor, Optional[torch.nn.Module]]:
    if isinstance(module_or_weight, kind):
        module: Any = module_or_weight
        if getattr(module, "max_norm", None) is not None:
            raise _invalid("max_norm renormalises rows at lookup time; edo's tables are read-only: drop it first")
        return module.weight, module
    if isinstance(module_or_weight, torch.Tensor):
        if module_or_weight.dim() != 2:
            raise _invalid(f"a weight must be 2-D, rows × dim (got shape {tuple(module_or_weight.shape)})")
        return module_or_weight, None
    raise TypeError(f"expected a torch.nn.{kind.__name__} or a 2-D weight tensor (got {type(module_or_weight).__name__})")


class Embedding(torch.nn.Module):
    """``nn.Embedding`` for inference over an edo table: ``forward(input)`` gives the rows of
    ``input`` (any shape of integer ids), shaped ``input.shape + (dim,)``."""

    def __init__(self, table: Table) -> None:
        super().__init__()
        self.table = table

    @classmethod
    def from_float(cls, module_or_weight: Union[torch.nn.Embedding, torch.Tensor], format: str = "int8") -> "Embedding":
        weight, _ = _weight(module_or_weight, torch.nn.Embedding)
        return cls(quantize(weight.detach().cpu().float().numpy(), format))

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.table.gather(input.detach().cpu().numpy()))

    def extra_repr(self) -> str:
        return f"{self.table.rows}, {self.table.dim}, format={self.table.format!r}"


class EmbeddingBag(torch.nn.Module):
    """``nn.EmbeddingBag`` for inference over an edo table: ``forward(input, offsets=None,
    per_sample_weights=None)`` as PyTorch's — 2-D input is bags of equal size, 1-D input takes
    offsets; ``padding_idx`` entries are left out of their bags (and out of a mean's count)."""

    def __init__(self, table: Table, mode: str = "mean", include_last_offset: bool = False, padding_idx: Optional[int] = None) -> None:
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise _invalid(f"mode must be 'sum', 'mean' or 'max' (got {mode!r})")
        if padding_idx is not None and padding_idx < 0:
            padding_idx += table.rows
        self.table, self.mode, self.include_last_offset, self.padding_idx = table, mode, include_last_offset, padding_idx

    @classmethod
    def from_float(
        cls,
        module_or_weight: Union[torch.nn.EmbeddingBag, torch.Tensor],
        format: str = "int8",
        mode: Optional[str] = None,
        include_last_offset: Optional[bool] = None,
        padding_idx: Optional[int] = None,
    ) -> "EmbeddingBag":
        """From an ``nn.EmbeddingBag`` (its mode, ``include_last_offset`` and ``padding_idx``, unless
        given) or a weight tensor (mode 'mean', PyTorch's default)."""
        weight, module = _weight(module_or_weight, torch.nn.EmbeddingBag)
        m: Any = module
        return cls(
            quantize(weight.detach().cpu().float().numpy(), format),
            mode if mode is not None else (m.mode if m is not None else "mean"),
            include_last_offset if include_last_offset is not None else (bool(m.include_last_offset) if m is not None else False),
            padding_idx if padding_idx is not None else (m.padding_idx if m is not None else None),
        )

    def forward(self, input: torch.Tensor, offsets: Optional[torch.Tensor] = None, per_sample_weights: Optional[torch.Tensor] = None) -> torch.Tensor:
        idx, offs, w = input.detach().cpu().numpy(), _numpy(offsets), _numpy(per_sample_weights)
        last = self.include_last_offset
        if self.padding_idx is not None:
            idx, offs, w, last = self._without_padding(idx, offs, w)
        return torch.from_numpy(self.table.bag(idx, offs, self.mode, w, last))

    def _without_padding(
        self, idx: NDArray[Any], offs: Optional[NDArray[Any]], w: Optional[NDArray[Any]]
    ) -> Tuple[NDArray[Any], NDArray[Any], Optional[NDArray[Any]], bool]:
        """The bags with their padding entries taken out, as 1-D indices and CSR offsets."""
        if idx.ndim == 2:
            b, n = idx.shape
            starts = np.arange(0, b * n, n) if n else np.zeros(b, dtype=np.int64)
            ends = starts + n
            flat, wflat = idx.reshape(-1), (None if w is None else w.reshape(-1))
        else:
            if offs is None:
                raise _invalid("offsets is required when input is 1-D (PyTorch's convention)")
            starts = offs[:-1] if self.include_last_offset else offs
            ends = offs[1:] if self.include_last_offset else np.append(offs[1:], len(idx))
            flat, wflat = idx, w
        keep = flat != self.padding_idx
        kept_before = np.concatenate([[0], np.cumsum(keep)])
        new_offsets = np.append(kept_before[starts.astype(np.int64)], kept_before[int(ends[-1])] if len(ends) else 0)
        return flat[keep], new_offsets, (None if wflat is None else wflat[keep]), True

    def extra_repr(self) -> str:
        return f"{self.table.rows}, {self.table.dim}, mode={self.mode!r}, format={self.table.format!r}"
