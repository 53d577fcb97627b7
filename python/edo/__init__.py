"""edo: compressed embedding tables, EmbeddingBag, binary search and static models, on the CPU
path or a GPU (wgpu: Vulkan, Metal, DX12), with numpy in and out.

    import numpy as np, edo
    table = edo.quantize(np.random.rand(100_000, 128).astype(np.float32), "int8")  # ~1/4 the bytes
    rows = table.gather([3, 14, 15])                       # (3, 128) float32
    pooled = table.bag(indices, offsets, mode="mean")      # torch.nn.EmbeddingBag's conventions
    model = edo.StaticModel.from_pretrained("potion-base-8M/")   # a model2vec folder
    vectors = model.encode(["the quick brown fox"])        # (1, dim), model2vec's vectors

Every lookup and encode releases the GIL; tables and models may be shared between threads.
"""

from __future__ import annotations

import json
import numbers
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _edo
from ._edo import __version__

__all__ = [
    "BadFileError",
    "BinaryCodes",
    "Cache",
    "DeviceLostError",
    "EdoError",
    "EdoIOError",
    "EdoMemoryError",
    "GpuError",
    "IdOutOfRangeError",
    "InvalidArgumentError",
    "NetworkError",
    "UnsupportedError",
    "Engine",
    "FORMATS",
    "GpuTable",
    "LiveTable",
    "PLAN_FORMATS",
    "Plan",
    "PlannedTable",
    "StaticModel",
    "Table",
    "__version__",
    "append_updates",
    "binary_codes",
    "load",
    "plan",
    "quantize",
]

#: The formats a table can be stored in (``Table.format``), as the library names them.
FORMATS: Tuple[str, ...] = tuple(_edo.FORMATS)

PathLike = Union[str, "os.PathLike[str]"]


class EdoError(Exception):
    """An error edo reports, with its message and a stable ``code`` — the same codes as the npm
    package's (``"ID_OUT_OF_RANGE"``, ``"BAD_FILE"``, ``"DEVICE_LOST"``, …). The subclasses below
    sort them by kind; those that are also a built-in exception (``IndexError``, ``ValueError``,
    ``OSError``, ``MemoryError``) are caught as that too."""

    def __init__(self, message: str, code: str = "INTERNAL") -> None:
        super().__init__(message)
        self.code = code


class IdOutOfRangeError(EdoError, IndexError):
    """An id past the table (``ID_OUT_OF_RANGE``)."""


class InvalidArgumentError(EdoError, ValueError):
    """A bad argument: shapes, offsets, non-finite values, limits (``SHAPE_MISMATCH``,
    ``BAD_OFFSETS``, ``NON_FINITE``, ``VALUE_OUT_OF_RANGE``, ``LIMIT_EXCEEDED``,
    ``INVALID_ARGUMENT``)."""


class BadFileError(EdoError):
    """A file that is not what it says (``BAD_FILE``, ``CHECKSUM``, ``UNSUPPORTED_VERSION``)."""


class EdoIOError(EdoError, OSError):
    """A file that could not be read or written (``IO``)."""


class UnsupportedError(EdoError):
    """Something edo does not do, named (``UNSUPPORTED``, ``TOKENIZER``, ``UNKNOWN_TOKEN``)."""


class GpuError(EdoError):
    """The GPU: no adapter, a wgpu error, its memory, a busy cache (``NO_GPU``, ``GPU_ERROR``,
    ``GPU_OUT_OF_MEMORY``, ``BUSY``)."""


class DeviceLostError(GpuError):
    """The GPU device was lost (a driver reset); make a new ``Engine`` (``DEVICE_LOST``)."""


class EdoMemoryError(EdoError, MemoryError):
    """Host memory ran out (``OUT_OF_MEMORY``)."""


class NetworkError(EdoError):
    """A remote file could not be read (``NETWORK``)."""


_BY_CODE = {
    "ID_OUT_OF_RANGE": IdOutOfRangeError,
    "SHAPE_MISMATCH": InvalidArgumentError,
    "BAD_OFFSETS": InvalidArgumentError,
    "NON_FINITE": InvalidArgumentError,
    "VALUE_OUT_OF_RANGE": InvalidArgumentError,
    "LIMIT_EXCEEDED": InvalidArgumentError,
    "INVALID_ARGUMENT": InvalidArgumentError,
    "BAD_FILE": BadFileError,
    "CHECKSUM": BadFileError,
    "UNSUPPORTED_VERSION": BadFileError,
    "IO": EdoIOError,
    "UNSUPPORTED": UnsupportedError,
    "TOKENIZER": UnsupportedError,
    "UNKNOWN_TOKEN": UnsupportedError,
    "NO_GPU": GpuError,
    "GPU_ERROR": GpuError,
    "GPU_OUT_OF_MEMORY": GpuError,
    "BUSY": GpuError,
    "DEVICE_LOST": DeviceLostError,
    "OUT_OF_MEMORY": EdoMemoryError,
    "NETWORK": NetworkError,
}


def _error_class(code: str) -> type:
    """The exception class of an edo error code (the native module raises through it)."""
    return _BY_CODE.get(code, EdoError)


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(message, "INVALID_ARGUMENT")
_MODES = ("sum", "mean", "max")


def _values(array: ArrayLike, name: str = "values") -> NDArray[np.float32]:
    """A 2-D float array as C-contiguous float32: the array itself when it is one already (no
    copy), else converted (float16, float64, Fortran order, strided views)."""
    a = np.asarray(array)
    if a.dtype.kind != "f":
        raise TypeError(f"{name} must be an array of floats (got dtype {a.dtype})")
    if a.ndim != 2:
        raise _invalid(f"{name} must be 2-D, rows × dim (got shape {a.shape})")
    return np.ascontiguousarray(a, dtype=np.float32)


def _ids(ids: ArrayLike, name: str) -> NDArray[np.uint32]:
    """Integer ids (any integer dtype, or a list) as contiguous uint32, checked: a negative id or
    one past 2³²−1 is a ValueError, never wrapped round. A contiguous uint32 array is passed on
    as it is (a view), with nothing to check: the fast path."""
    if type(ids) is np.ndarray:
        if ids.dtype == np.uint32 and ids.flags.c_contiguous:
            return ids.reshape(-1)
        if ids.dtype == np.int64:
            return _edo.ids_u32(ids.reshape(-1), name)
    a = np.asarray(ids)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # np.asarray([]) is float64: an empty list of ids
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers (got dtype {a.dtype})")
    if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFFFFFF):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise _invalid(f"{name} holds {bad}: ids are integers from 0 to 4294967295")
    return np.ascontiguousarray(a.reshape(-1), dtype=np.uint32)


def _keys(keys: ArrayLike, name: str = "keys") -> NDArray[np.uint64]:
    """Integer keys (any integer dtype, or a list) as contiguous uint64; a negative one is a
    ValueError, never wrapped round."""
    a = np.asarray(keys)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.uint64)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers (got dtype {a.dtype})")
    if a.dtype.kind == "i" and a.size and int(a.min()) < 0:
        raise _invalid(f"{name} holds {int(a.min())}: keys are integers from 0 to 2**64 - 1")
    return np.ascontiguousarray(a.reshape(-1), dtype=np.uint64)


def _bag_args(
    indices: ArrayLike,
    offsets: Optional[ArrayLike],
    mode: str,
    per_sample_weights: Optional[ArrayLike],
    include_last_offset: bool,
) -> Tuple[NDArray[Any], NDArray[np.uint32], Optional[NDArray[np.float32]]]:
    """PyTorch's EmbeddingBag arguments as edo takes them: 2-D indices (B, N) are B bags of N
    with no offsets; 1-D indices need offsets, one start per bag (or with the end too when
    include_last_offset). The indices come back checked for shape only: row ids go through
    ``_ids``, a live table's keys through ``_keys``."""
    if mode not in _MODES:
        raise _invalid(f"mode must be one of {', '.join(_MODES)} (got {mode!r})")
    idx = np.asarray(indices)
    if idx.ndim == 2:
        if offsets is not None:
            raise _invalid("offsets must be None when indices is 2-D (B, N): each row is a bag")
        b, n = idx.shape
        offs = np.arange(b + include_last_offset, dtype=np.uint32) * np.uint32(n)
    elif idx.ndim == 1:
        if offsets is None:
            raise _invalid("offsets is required when indices is 1-D (PyTorch's convention)")
        o = np.asarray(offsets)
        if o.ndim != 1:
            raise _invalid(f"offsets must be 1-D (got shape {o.shape})")
        offs = _ids(o, "offsets")
    else:
        raise _invalid(f"indices must be 1-D (with offsets) or 2-D (got shape {idx.shape})")
    weights = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise _invalid(f"per_sample_weights needs mode='sum' (got {mode!r}), as in PyTorch")
        w = np.asarray(per_sample_weights)
        if w.shape != idx.shape:
            raise _invalid(f"per_sample_weights must have the shape of indices {idx.shape} (got {w.shape})")
        weights = np.ascontiguousarray(w.reshape(-1), dtype=np.float32)
    return idx, offs, weights


def _as(rows: NDArray[np.float32], dtype: object) -> NDArray[np.floating]:
    if dtype is np.float32:
        return rows
    d = np.dtype(dtype)  # type: ignore[call-overload]
    if d == np.float32:
        return rows
    if d == np.float16:
        return rows.astype(np.float16)
    raise _invalid(f"dtype must be float32 or float16 (got {d})")


class _Lookups:
    """The lookups ``Table`` and ``GpuTable`` share: the same arguments and conventions, run by
    their native object ``_t`` (on the host rows, or on the GPU)."""

    __slots__ = ("_t",)
    _t: Union[_edo.Table, _edo.GpuTable, _edo.Cache, _edo.PlannedTable]

    @property
    def dim(self) -> int:
        return self._t.dim

    def gather(self, ids: ArrayLike, dtype: object = np.float32) -> NDArray[np.floating]:
        """The rows of ``ids`` decoded, shaped ``ids.shape + (dim,)`` (as ``nn.Embedding``);
        float32, or float16 (rounded to nearest even). An id out of range is an IndexError."""
        rows = self._t.gather(_ids(ids, "ids"))
        if type(ids) is np.ndarray and ids.ndim == 1:
            return _as(rows, dtype)
        return _as(rows.reshape(*np.shape(ids), self.dim), dtype)

    def bag(
        self,
        indices: ArrayLike,
        offsets: Optional[ArrayLike] = None,
        mode: str = "sum",
        per_sample_weights: Optional[ArrayLike] = None,
        include_last_offset: bool = False,
        dtype: object = np.float32,
    ) -> NDArray[np.floating]:
        """EmbeddingBag with ``torch.nn.functional.embedding_bag``'s conventions: ``(bags, dim)``.
        An empty bag is a zero row."""
        i, o, w = _bag_args(indices, offsets, mode, per_sample_weights, include_last_offset)
        return _as(self._t.bag(_ids(i, "indices"), o, mode, w, include_last_offset), dtype)


class Table(_Lookups):
    """A table of ``rows × dim`` values stored compressed (``format``) in host memory."""

    __slots__ = ()
    _t: _edo.Table

    def __init__(self, raw: _edo.Table) -> None:
        self._t = raw

    @property
    def format(self) -> str:
        """The storage format (one of ``FORMATS``)."""
        return self._t.format

    @property
    def rows(self) -> int:
        return self._t.rows

    @property
    def shape(self) -> Tuple[int, int]:
        return (self._t.rows, self._t.dim)

    @property
    def nbytes(self) -> int:
        """Bytes of the packed rows (and their scales)."""
        return self._t.nbytes

    def dequantize(self) -> NDArray[np.float32]:
        """Every row decoded: ``(rows, dim)`` float32."""
        return self._t.dequantize()

    def quantize(self, format: str) -> "Table":
        """The same rows in another format."""
        return Table(self._t.quantize(format))

    def save(self, path: PathLike) -> None:
        """Writes an ``.edo`` file (``edo.load`` and the ``edo`` command read it)."""
        self._t.save(os.fspath(path))

    def to(self, engine: "Engine") -> "GpuTable":
        """The table placed on ``engine``: uploaded to its GPU, or kept here on the CPU path."""
        return GpuTable(self._t.to(engine._e))

    def __repr__(self) -> str:
        return f"edo.Table(rows={self.rows}, dim={self.dim}, format={self.format!r}, nbytes={self.nbytes})"


def quantize(array: ArrayLike, format: str = "int8") -> Table:
    """A table of a 2-D float array (float32 is used as it is; float16, float64 and
    non-contiguous arrays are converted) in ``format``. NaN or infinite values are a ValueError."""
    return Table(_edo.quantize(_values(array), format))


def load(
    path: PathLike, format: Optional[str] = None, *, tensor: Optional[str] = None, layout: str = "dense", dim: Optional[int] = None
) -> Table:
    """A table from a file: ``.edo`` (memory-mapped, as stored, or re-quantised to ``format``);
    safetensors, ``.npy``, GGUF or word2vec/GloVe text, quantised to ``format`` (default fp32;
    GGUF's block formats stay as stored; ``tensor`` picks one of a file's tensors); FBGEMM's fused
    8-bit or 4-bit rows as stored with ``layout='fbgemm8'|'fbgemm4'`` (4-bit rows with their
    ``dim``: a row's width fits two dims, and without it the larger is read)."""
    return Table(_edo.load(os.fspath(path), format, tensor, layout, dim))


class BinaryCodes:
    """One bit per value of each row, for Hamming search with rescoring."""

    __slots__ = ("_c",)

    def __init__(self, raw: _edo.Codes) -> None:
        self._c = raw

    @property
    def rows(self) -> int:
        return self._c.rows

    @property
    def dim(self) -> int:
        return self._c.dim

    @property
    def transform(self) -> Optional[str]:
        """'centered', 'itq', or None (plain signs)."""
        return self._c.transform

    @property
    def nbytes(self) -> int:
        return self._c.nbytes

    def search(
        self, queries: ArrayLike, k: int, rescore: Optional[Table] = None, multiplier: int = 10
    ) -> Tuple[NDArray[np.int64], NDArray[np.float32]]:
        """The best ``k`` rows for each query (``(n, dim)``, or one ``(dim,)`` query): the Hamming
        top ``k × multiplier`` rescored by dot product with ``rescore`` (a table of the same rows,
        INT8 say), or ordered by the asymmetric score against the codes. Returns ``(ids,
        scores)``, each ``(n, min(k, rows))`` (1-D for one query), best first."""
        q = np.asarray(queries)
        one = q.ndim == 1
        ids, scores = self._c.search(_values(q.reshape(1, -1) if one else q, "queries"), int(k), rescore._t if rescore else None, int(multiplier))
        ids64 = ids.astype(np.int64)
        return (ids64[0], scores[0]) if one else (ids64, scores)


def binary_codes(array: ArrayLike, transform: Optional[str] = "itq", iterations: int = 50) -> BinaryCodes:
    """Binary codes of the rows of a 2-D float array: ITQ-rotated (default: more neighbours
    kept), centred, or plain signs (``transform=None``)."""
    return BinaryCodes(_edo.binary_codes(_values(array), transform, iterations))


class StaticModel:
    """A static embedding model — model2vec's, sentence-transformers' StaticEmbedding, or an
    ``.edo`` model file — with model2vec's ``encode``."""

    __slots__ = ("_m",)

    def __init__(self, raw: _edo.Model) -> None:
        self._m = raw

    @classmethod
    def from_pretrained(cls, path: PathLike) -> "StaticModel":
        """A model folder on disk (model2vec's ``config.json``/``tokenizer.json``/
        ``model.safetensors``, or a sentence-transformers folder), or an ``.edo`` model file."""
        return cls(_edo.Model.open(os.fspath(path)))

    @property
    def dim(self) -> int:
        return self._m.dim

    @property
    def normalize(self) -> bool:
        return self._m.normalize

    @property
    def format(self) -> str:
        return self._m.format

    def encode(
        self, sentences: Union[str, Sequence[str]], normalize: Optional[bool] = None, batch_size: int = 1024
    ) -> NDArray[np.float32]:
        """Sentence vectors: ``(len(sentences), dim)`` float32, or ``(dim,)`` for one string (as
        model2vec); ``normalize`` overrides the model's setting."""
        if batch_size < 1:
            raise _invalid(f"batch_size must be at least 1 (got {batch_size})")
        if isinstance(sentences, str):
            return self._m.encode_one(sentences, normalize)
        texts: list[str] = sentences if type(sentences) is list else list(sentences)
        # (A text that is not a str is a TypeError from the native call.)
        if len(texts) <= batch_size:
            return self._m.encode(texts, normalize)
        return np.concatenate([self._m.encode(texts[i : i + batch_size], normalize) for i in range(0, len(texts), batch_size)])

    def tokenize(self, text: str) -> list[int]:
        """The token ids of ``text`` that count (after the model's cut and unknown tokens)."""
        return list(self._m.tokenize(text))

    def quantize(self, format: str) -> "StaticModel":
        """The same model with its table in another format ('int8' keeps the vectors within ~1e-2)."""
        return StaticModel(self._m.quantize(format))

    def save(self, path: PathLike) -> None:
        """Writes one ``.edo`` model file (table, tokenizer and settings)."""
        self._m.save(os.fspath(path))

    def __repr__(self) -> str:
        return f"edo.StaticModel(dim={self.dim}, format={self.format!r}, normalize={self.normalize})"


class Engine:
    """Where lookups run: a GPU through wgpu (Vulkan, Metal, DX12) — tables placed on it survive
    a device loss — or the CPU path. ``backend="auto"`` (the default) takes a GPU when there is
    one and otherwise the CPU path, saying why in ``note``; ``"gpu"`` is a ``GpuError`` without
    one; ``"cpu"`` never asks. ``memory_budget`` caps the GPU bytes edo allocates (tables, caches,
    scratch): past it a call is refused before anything is allocated, and caches shrink. It is a
    GPU budget: the CPU path has none (its tables are the host memory they were made in)."""

    __slots__ = ("_e",)
    _available: Optional[bool] = None

    def __init__(self, backend: str = "auto", *, memory_budget: Optional[int] = None) -> None:
        self._e = _edo.Engine(backend, memory_budget)

    @staticmethod
    def available() -> bool:
        """Whether a GPU engine can be made here (tried once, remembered)."""
        if Engine._available is None:
            Engine._available = _edo.Engine("auto", None).backend == "gpu"
        return Engine._available

    @property
    def backend(self) -> str:
        """``"gpu"`` or ``"cpu"``."""
        return self._e.backend

    @property
    def note(self) -> str:
        """The adapter in words, or why the CPU path ("no GPU (…); using the CPU path")."""
        return self._e.note

    @property
    def adapter(self) -> Optional[str]:
        """The adapter, in words ("NVIDIA H200 (Vulkan, DiscreteGpu, …)"); None on the CPU path."""
        return self._e.adapter

    def memory_report(self) -> Optional[Dict[str, Any]]:
        """Every GPU buffer edo holds, by owner and purpose, and the budget (as ``edo``'s JSON,
        with the printable text under ``"text"``); None on the CPU path."""
        report = self._e.memory_report()
        if report is None:
            return None
        text, data = report
        out: Dict[str, Any] = json.loads(data)
        out["text"] = text
        return out

    def cache(self, source: Union[Table, str], capacity: int, policy: str = "lfu") -> "Cache":
        """A row cache of ``capacity`` rows in front of ``source``: a ``Table`` (one ``edo.load``
        mapped from an ``.edo`` file included: its pages are read as rows are missed) or the URL
        of a remote ``.edo`` file (read with HTTP range requests, each chunk checked). Its slots
        are on the GPU, or in host memory on the CPU path; ``policy`` is ``lru``, ``lfu``, ``arc``
        or one of them with ``+tinylfu`` admission. Lookups return the resident table's rows."""
        if isinstance(source, Table):
            return Cache(self._e.cache(capacity, policy, source._t, None))
        if isinstance(source, str) and source.startswith(("http://", "https://")):
            return Cache(self._e.cache(capacity, policy, None, source))
        raise TypeError(f"source must be an edo.Table or an http(s) URL (got {source!r}); edo.load(path) maps an .edo file")

    def __repr__(self) -> str:
        return f"edo.Engine(backend={self.backend!r}, note={self.note!r})"


class GpuTable(_Lookups):
    """A table placed on an ``Engine``: resident on its GPU, or its host rows on the CPU path
    (``backend`` says which); ``Table``'s lookups, run there."""

    __slots__ = ()
    _t: _edo.GpuTable

    def __init__(self, raw: _edo.GpuTable) -> None:
        self._t = raw

    @property
    def backend(self) -> str:
        """``"gpu"`` or ``"cpu"``."""
        return self._t.backend


class Cache(_Lookups):
    """A row cache over a slow or large table (``Engine.cache``): ``gather`` and ``bag`` as
    ``Table``'s, reading only the rows it misses; ``prefetch`` reads the next batch's misses
    ahead; ``stats`` counts hits, misses, evictions and what prefetches staged."""

    __slots__ = ()
    _t: _edo.Cache

    def __init__(self, raw: _edo.Cache) -> None:
        self._t = raw

    @property
    def backend(self) -> str:
        """Where the slots are: ``"gpu"`` or ``"cpu"``."""
        return self._t.backend

    @property
    def format(self) -> str:
        return self._t.format

    @property
    def rows(self) -> int:
        return self._t.rows

    @property
    def occupancy(self) -> Tuple[int, int]:
        """(rows held now, rows it may hold)."""
        return self._t.occupancy()

    def prefetch(self, ids: ArrayLike) -> int:
        """Reads the rows of ``ids`` the cache misses now, for the next lookup; how many it read."""
        return self._t.prefetch(_ids(ids, "ids"))

    def stats(self) -> Dict[str, int]:
        """lookups, hits, misses, evictions, prefetched, served_from_staging, batches, parts,
        bytes_uploaded, shared_reads."""
        return dict(self._t.stats())

    def reset_stats(self) -> None:
        self._t.reset_stats()

    def __repr__(self) -> str:
        held, most = self.occupancy
        return f"edo.Cache(rows={self.rows}, dim={self.dim}, format={self.format!r}, backend={self.backend!r}, held={held}/{most})"


#: Formats the planner chooses from unless told.
PLAN_FORMATS: Tuple[str, ...] = ("fp16", "int8", "int4", "binary_scaled")
#: Rows of a table the planner measures each format's error on: up to this many, evenly spaced.
_SAMPLE_ROWS = 2048


class PlannedTable(_Lookups):
    """A table built as its plan says (``Plan.build``): resident in one format, mixed precision
    (the most looked-up rows in one format, the rest in another), or the host table of a cache.
    ``gather`` and ``bag`` run on the CPU path; ``to(engine)`` places it as planned."""

    __slots__ = ()
    _t: _edo.PlannedTable

    def __init__(self, raw: _edo.PlannedTable) -> None:
        self._t = raw

    @property
    def choice(self) -> str:
        """What the plan chose ("resident int8", "mixed: 1000 hot rows fp16, rest int4", …)."""
        return self._t.choice

    @property
    def rows(self) -> int:
        return self._t.rows

    @property
    def nbytes(self) -> int:
        """Bytes of its rows in host memory."""
        return self._t.nbytes

    def to(self, engine: Engine) -> Union[GpuTable, Cache]:
        """Placed on ``engine`` as planned: resident, or behind an LFU cache of the planned rows."""
        if self._t.cache_capacity is not None:
            return Cache(self._t.to_cache(engine._e))
        return GpuTable(self._t.to_table(engine._e))

    def __repr__(self) -> str:
        return f"edo.PlannedTable({self.choice!r}, rows={self.rows}, dim={self.dim}, nbytes={self.nbytes})"


class Plan:
    """How to hold each table within a GPU budget (``edo.plan``); ``str(plan)`` is the table
    ``edo plan`` prints, ``tables`` the same as dicts."""

    __slots__ = ("_p", "_names", "_values")

    def __init__(self, raw: _edo.Plan, names: Sequence[str], values: Dict[str, NDArray[np.float32]]) -> None:
        self._p, self._names, self._values = raw, list(names), values

    @property
    def budget(self) -> int:
        return self._p.budget

    @property
    def nbytes(self) -> int:
        """GPU bytes of the plan (at most the budget)."""
        return self._p.bytes

    @property
    def expected_error(self) -> float:
        """The lookup-weighted mean relative error of a looked-up row."""
        return self._p.expected_error

    @property
    def int8_nbytes(self) -> int:
        """GPU bytes of every table resident in INT8, for comparison."""
        return self._p.int8_bytes

    @property
    def int8_error(self) -> float:
        return self._p.int8_error

    @property
    def tables(self) -> list[Dict[str, Any]]:
        """Per table: name, choice, bytes, expected_error, hit_rate, int8_bytes, int8_error and
        cache_capacity (None unless cached)."""
        keys = ("name", "choice", "bytes", "expected_error", "hit_rate", "int8_bytes", "int8_error", "cache_capacity")
        return [dict(zip(keys, row)) for row in self._p.tables()]

    def to_json(self) -> Dict[str, Any]:
        """The plan as ``edo plan --json`` prints it."""
        out: Dict[str, Any] = json.loads(self._p.json())
        return out

    def build(self, name: str, values: Optional[ArrayLike] = None) -> PlannedTable:
        """Table ``name`` made as planned from its values (the array given to ``edo.plan``, or
        ``values``: the same rows × dim)."""
        if name not in self._names:
            raise _invalid(f"no table {name!r} in the plan ({', '.join(self._names)})")
        if values is None:
            if name not in self._values:
                raise _invalid(f"{name!r} was planned from its shape: give its values")
            data = self._values[name]
        else:
            data = _values(values)
        return PlannedTable(self._p.build(self._names.index(name), data))

    def __str__(self) -> str:
        return str(self._p)

    def __repr__(self) -> str:
        return f"edo.Plan(budget={self.budget}, nbytes={self.nbytes}, expected_error={self.expected_error:.3g}, tables={len(self._names)})"


def plan(
    tables: Dict[str, Union[ArrayLike, Tuple[int, int]]],
    budget: int,
    *,
    access: Optional[Dict[str, Union[str, float, ArrayLike]]] = None,
    lookups: Optional[Dict[str, float]] = None,
    formats: Sequence[str] = PLAN_FORMATS,
    mixed: bool = True,
    min_hit_rate: float = 0.9,
    miss_cost: float = 1e-4,
) -> Plan:
    """Chooses per table how to hold it in ``budget`` GPU bytes — resident in a format, cached (the
    hot rows on the GPU), or mixed precision — for the least expected error of a looked-up row
    (``edo plan``'s planner). ``tables`` maps a name to its values (a 2-D float array: errors are
    measured on up to 2 048 of its rows, and ``Plan.build(name)`` makes it) or to ``(rows, dim)``
    (errors measured on synthetic rows). ``access[name]`` is ``"uniform"`` (the default), a Zipf
    exponent (row 0 the most looked up) or lookup counts per row; ``lookups[name]`` weighs a
    table against the others (default 1). Not even the smallest choices fitting is an
    ``InvalidArgumentError`` (``LIMIT_EXCEEDED``)."""
    access, lookups = access or {}, lookups or {}
    unknown = (set(access) | set(lookups)) - set(tables)
    if unknown:
        raise _invalid(f"access or lookups name tables not planned: {', '.join(sorted(unknown))}")
    args: list[Any] = []
    values: Dict[str, NDArray[np.float32]] = {}
    for name, table in tables.items():
        if isinstance(table, tuple) and len(table) == 2 and all(isinstance(x, numbers.Integral) for x in table):
            (rows, dim), sample = (int(table[0]), int(table[1])), None
        else:
            v = values[name] = _values(table, name)
            rows, dim = v.shape
            sample = np.ascontiguousarray(v[:: max(1, -(-rows // _SAMPLE_ROWS))])
        a = access.get(name, "uniform")
        zipf, counts = None, None
        if isinstance(a, str):
            if a != "uniform":
                raise _invalid(f"access[{name!r}] must be 'uniform', a Zipf exponent or counts (got {a!r})")
        elif isinstance(a, numbers.Real) and not isinstance(a, bool):
            zipf = float(a)
        else:
            c = np.asarray(a)
            if c.dtype.kind not in "iu":
                raise TypeError(f"access[{name!r}] must be 'uniform', a Zipf exponent or integer counts (got dtype {c.dtype})")
            if c.size and int(c.min()) < 0:
                raise _invalid(f"access[{name!r}] holds {int(c.min())}: counts are not negative")
            counts = np.ascontiguousarray(c.reshape(-1), dtype=np.uint64)
            if counts.size != rows:
                raise _invalid(f"access[{name!r}]: {counts.size} counts for {rows} rows")
        args.append((name, rows, dim, zipf, counts, float(lookups.get(name, 1.0)), sample))
    raw = _edo.plan(args, budget, list(formats), mixed, min_hit_rate, miss_cost)
    return Plan(raw, list(tables), values)


_MISSING = ("error", "zero", "init")


def _missing(missing: str) -> str:
    if missing not in _MISSING:
        raise _invalid(f"missing must be one of {', '.join(_MISSING)} (got {missing!r})")
    return missing


class LiveTable:
    """Rows by 64-bit key (item ids, hashes) that take new keys, updates and snapshot swaps while
    other threads look rows up: each lookup sees every row wholly old or wholly new, updates apply
    whole and in order, a damaged snapshot never replaces the table (``docs/live.md``).

    ``init`` is the first row of a new key (default zeros), or ``hashed`` a table whose row
    ``hash(key) % rows`` is; past ``max_rows`` keys, a new key evicts the one ``policy`` picks
    (``lru``, ``lfu``, ``arc``, or any of them with ``+tinylfu`` admission). ``path`` starts the
    table from an ``.edo`` file: a live table's snapshot, or a plain table whose row ``i`` is key
    ``i``. The GIL is released in every lookup and change."""

    __slots__ = ("_t",)

    def __init__(
        self,
        format: str = "int8",
        dim: Optional[int] = None,
        *,
        capacity: int = 1024,
        max_rows: Optional[int] = None,
        policy: str = "lru",
        init: Optional[ArrayLike] = None,
        hashed: Optional[Table] = None,
        memory_budget: Optional[int] = None,
        path: Optional[PathLike] = None,
    ) -> None:
        if dim is None:
            raise _invalid("dim is required")
        row = None if init is None else np.ascontiguousarray(np.asarray(init, dtype=np.float32).reshape(-1))
        self._t = _edo.LiveTable(
            format,
            dim,
            capacity,
            max_rows,
            policy,
            row,
            None if hashed is None else hashed._t,
            memory_budget,
            None if path is None else os.fspath(path),
        )

    @staticmethod
    def open(path: PathLike, *, max_rows: Optional[int] = None, policy: str = "lru") -> "LiveTable":
        """A live table holding the rows of the ``.edo`` file at ``path``, in its format and dim."""
        t = _edo.stored_shape(os.fspath(path))
        return LiveTable(t[0], t[1], capacity=max(t[2], 1), max_rows=max_rows, policy=policy, path=path)

    @property
    def format(self) -> str:
        return self._t.format

    @property
    def dim(self) -> int:
        return self._t.dim

    @property
    def capacity(self) -> int:
        """Slots allocated now (they double as keys arrive, up to ``max_rows``)."""
        return self._t.capacity

    @property
    def version(self) -> int:
        """Snapshots swapped in since the table was made."""
        return self._t.version

    @property
    def nbytes(self) -> int:
        return self._t.nbytes

    def __len__(self) -> int:
        return len(self._t)

    def __contains__(self, key: int) -> bool:
        return int(key) >= 0 and self._t.__contains__(int(key))

    def stats(self) -> Dict[str, int]:
        """Counters since the table was made."""
        names = ("lookups", "unknown", "inserts", "evictions", "update_batches", "rows_updated", "swaps")
        return dict(zip(names, self._t.stats()))

    def gather(self, keys: ArrayLike, missing: str = "error") -> NDArray[np.float32]:
        """The rows of ``keys``, shaped ``keys.shape + (dim,)``. An unknown key is an IndexError
        (``missing="error"``), a zero row (``"zero"``) or the initial row (``"init"``)."""
        rows = self._t.gather(_keys(keys), _missing(missing))
        return rows.reshape(*np.shape(keys), self.dim)

    def find_or_insert(self, keys: ArrayLike) -> NDArray[np.float32]:
        """The rows of ``keys``, giving the keys the table does not hold a slot and their initial
        row first (evicting past ``max_rows``)."""
        return self._t.find_or_insert(_keys(keys)).reshape(*np.shape(keys), self.dim)

    def bag(
        self,
        keys: ArrayLike,
        offsets: Optional[ArrayLike] = None,
        mode: str = "sum",
        per_sample_weights: Optional[ArrayLike] = None,
        include_last_offset: bool = False,
        missing: str = "error",
    ) -> NDArray[np.float32]:
        """EmbeddingBag over keys, with ``torch.nn.functional.embedding_bag``'s conventions."""
        k, o, w = _bag_args(keys, offsets, mode, per_sample_weights, include_last_offset)
        return self._t.bag(_keys(k), o, mode, _missing(missing), w, include_last_offset)

    def update(self, keys: ArrayLike, values: ArrayLike) -> Dict[str, int]:
        """Writes ``values`` (``len(keys) × dim``) as the rows of ``keys``, inserting new keys:
        applied whole, after every update before it, or refused (nothing changed)."""
        k = _keys(keys)
        v = _values(np.asarray(values).reshape(len(k), -1) if np.size(values) else np.zeros((0, self.dim), np.float32))
        sequence, inserted, evicted = self._t.update(k, v)
        return {"sequence": sequence, "inserted": inserted, "evicted": evicted}

    def apply_log(self, path: PathLike) -> int:
        """Replays an update log (``append_updates``); every batch checked before the first
        applies. Returns the batches applied."""
        return len(self._t.apply_log(os.fspath(path)))

    def remove(self, keys: ArrayLike) -> int:
        """Removes ``keys``; returns how many the table held. Raises ``EdoError`` when the GPU copy
        fails meanwhile (the keys are removed on the host all the same; the copy is dropped)."""
        return self._t.remove(_keys(keys))

    def usage(self, keys: ArrayLike) -> NDArray[np.uint64]:
        """Lookups of each key since it came in (0 for a key not held)."""
        return self._t.usage(_keys(keys))

    def save(self, path: PathLike) -> None:
        """Writes the table as a keyed ``.edo`` file (a snapshot ``swap`` and ``open`` read)."""
        self._t.save(os.fspath(path))

    def swap(self, path: PathLike) -> Dict[str, float]:
        """Replaces the whole table with the ``.edo`` file at ``path`` once it has verified and
        matches the format and dim (otherwise an error, the table unchanged); lookups running
        finish on the old table."""
        version, keys, old, new, pause = self._t.swap(os.fspath(path))
        return {"version": version, "keys": keys, "old_bytes": old, "new_bytes": new, "pause_seconds": pause}

    def __repr__(self) -> str:
        return f"edo.LiveTable(keys={len(self)}, dim={self.dim}, format={self.format!r}, version={self.version})"


def append_updates(path: PathLike, keys: ArrayLike, values: ArrayLike) -> None:
    """Appends a batch of updates (``keys``, ``len(keys) × dim`` values) to the update log at
    ``path`` (``LiveTable.apply_log``, ``edo update``), writing its header when the file is new."""
    k = _keys(keys)
    _edo.append_updates(os.fspath(path), k, _values(np.asarray(values).reshape(len(k), -1)))
