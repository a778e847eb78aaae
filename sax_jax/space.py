"""Design space: axes and options, the ``Design`` pytree, mixed-radix index <-> design.

A design point is a struct of arrays, one leaf per axis. Numeric axes (tp, cp, pp, dp, ep, vpp, mbs) hold
their values as float32 so the relaxed search can move them continuously; categorical axes hold int32 codes
into the global option tuples below (placement and transport codes index the tuples of the scenario's
``PLACEMENTS`` / transport list). ``decode`` runs on device: an exhaustive sweep never builds designs on the host.
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .specs import ConfigError

class Option(enum.IntEnum):
    """Codes of a categorical axis. Members are declared with their option name; the code is the declaration
    order, so the option tuples below and every comparison in the model come from one place."""

    def __new__(cls, label: str):
        code = len(cls.__members__)
        member = int.__new__(cls, code)
        member._value_ = code
        member.label = label
        return member

    @classmethod
    def labels(cls) -> tuple:
        return tuple(m.label for m in cls)


class Schedule(Option):
    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    ZB_H1 = "zb-h1"
    ZB_H2 = "zb-h2"
    LATENCY_AWARE = "latency-aware"


class Recompute(Option):
    NONE = "none"
    SELECTIVE = "selective"  # Megatron: the attention core only (Korthikanti et al. 2022)
    FULL = "full"  # every layer from its input
    # every 2nd layer fully recomputed: torchtitan's layer-level selective activation checkpointing at its default
    # frequency 2; its op-level policy (every 2nd matmul and the elementwise ops recomputed, attention saved) costs
    # about the same forward FLOPs
    HALF = "half"


def full_recompute_share(recompute):
    """Fraction of layers recomputed from their input (works on codes, traced or not)."""
    return 1.0 * (recompute == Recompute.FULL) + 0.5 * (recompute == Recompute.HALF)


def recompute_share(recompute, recompute_layers, chunk_layers):
    """full_recompute_share with Megatron-Core's block method (Training.recompute_layers N > 0): full recompute
    recomputes N of a pipeline chunk's chunk_layers layers (all of them when N >= chunk_layers)."""
    block = jnp.where(recompute_layers > 0, jnp.minimum(recompute_layers / chunk_layers, 1.0), 1.0)
    return jnp.where(recompute == Recompute.FULL, block, full_recompute_share(recompute))


class Sharding(Option):
    ZERO0 = "zero0"  # replicated optimizer, all-reduced gradients
    ZERO1 = "zero1"  # Megatron's distributed optimizer
    ZERO2 = "zero2"
    FSDP = "fsdp"  # ZeRO-3
    HSDP = "hsdp"  # ZeRO-3 inside the building (or node: Training.hsdp_shard), replicated across


class DpAlgo(Option):
    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"
    # sharded parameter server: each rank serves 1/n of the gradient, every rank pushes each shard to its server and
    # pulls the reduced shard back, all peers at once (cost/collectives.py ps_reduce_scatter_s)
    PS = "ps"


class Overlap(Option):
    NONE = "none"
    DP = "dp"
    DP_TP = "dp+tp"


class DpSync(Option):
    """How data-parallel replicas synchronize (cost/outer_sync.py)."""
    EVERY_STEP = "every_step"  # synchronous data parallelism: gradients reduced over the whole group every step
    # DiLoCo (Douillard et al. 2023, arXiv 2311.08105): workers (buildings or regions) take sync_every local steps,
    # syncing only inside the worker, then all-reduce the outer gradient (parameter delta) across workers, blocking
    DILOCO = "diloco"
    # Streaming DiLoCo (Douillard et al. 2025, arXiv 2501.18512): the model in fragments, one synced at a time,
    # each fragment's outer all-reduce overlapped with the next inner steps
    STREAMING = "streaming"


class OuterPrecision(Option):
    """Bytes per element of the outer gradient on the wire (streaming DiLoCo sends it in 4 bits without loss of
    quality, arXiv 2501.18512 section 3)."""
    FP32 = "fp32"
    BF16 = "bf16"
    FP8 = "fp8"
    FP4 = "fp4"


OUTER_BYTES = (4.0, 2.0, 1.0, 0.5)  # per OuterPrecision code


class ExpertPlacement(Option):
    """Where a MoE layer's experts live in the EP group (host tables: sax_jax/moe/; cost: cost/expert_placement.py).
    Without an activation trace every policy is ``contiguous`` with the model's constant locality and imbalance."""
    CONTIGUOUS = "contiguous"  # expert e on EP rank e * ep // experts (Megatron-Core's layout)
    EPLB = "eplb"  # DeepSeek EPLB: redundant replicas of the hot experts, balanced packing (hierarchical or global)
    LOCALITY = "locality"  # domain-grouped micro-batches, each domain's popular experts beside its tokens (the seed's)
    NODE_LIMITED = "node-limited"  # DeepSeek-V3 node-limited routing: a token reaches at most M nodes


class LayerSplit(Option):
    """Layers per pipeline stage when the pipeline crosses buildings of different GPU types (cost/hetero.py)."""
    EVEN = "even"  # every stage the same (today's split)
    SPEED = "speed"  # proportional to each GPU type's measured per-layer time
    OPTIMIZED = "optimized"  # the integer split that minimizes the slowest stage


class BatchSplit(Option):
    """The global batch over data-parallel replicas in buildings of different GPU types (cost/hetero.py)."""
    EVEN = "even"
    BALANCED = "balanced"  # microbatches per replica so the slowest replica finishes first


LAYER_SPLITS = LayerSplit.labels()
BATCH_SPLITS = BatchSplit.labels()

SCHEDULES = Schedule.labels()
RECOMPUTE = Recompute.labels()
SHARDING = Sharding.labels()
DP_ALGOS = DpAlgo.labels()
OVERLAP = Overlap.labels()
DP_SYNCS = DpSync.labels()
OUTER_PRECISIONS = OuterPrecision.labels()
EXPERT_PLACEMENTS = ExpertPlacement.labels()
LAYOUT_AXES = ("tp", "cp", "pp", "dp")  # axes of the rank layout; ep lives inside dp
PLACEMENTS = tuple("-".join(p) for p in itertools.permutations(LAYOUT_AXES))

NUMERIC_AXES = ("tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "qps", "channels", "sync_every", "xb_bandwidth_GBps",
                "xb_planes", "xb_oversub")
# 0 = "auto": derived (dp), the transport's own setting (qps, channels) or the system file's (xb_*: cost/provision.py)
AUTO_AXES = ("dp", "qps", "channels", "xb_bandwidth_GBps", "xb_planes", "xb_oversub")
REAL_AXES = ("xb_bandwidth_GBps", "xb_oversub")  # numeric axes that need not be whole numbers
CATEGORICAL_AXES = ("schedule", "recompute", "sharding", "placement", "transport", "dp_algo", "overlap", "dp_sync",
                    "outer_precision", "expert_placement", "layer_split", "batch_split")
AXES = ("tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "recompute", "placement", "transport", "qps", "channels",
        "schedule", "sharding", "dp_algo", "overlap", "dp_sync", "sync_every", "outer_precision",
        "xb_bandwidth_GBps", "xb_planes", "xb_oversub", "expert_placement", "layer_split", "batch_split")  # = Design field order
_GLOBAL_OPTIONS = {"schedule": SCHEDULES, "recompute": RECOMPUTE, "sharding": SHARDING,
                   "placement": PLACEMENTS, "dp_algo": DP_ALGOS, "overlap": OVERLAP, "dp_sync": DP_SYNCS,
                   "outer_precision": OUTER_PRECISIONS, "expert_placement": EXPERT_PLACEMENTS,
                   "layer_split": LAYER_SPLITS, "batch_split": BATCH_SPLITS}
AUTO = 0.0  # value of an AUTO_AXES axis meaning "auto"


def axis_dtype(axis: str):
    """Leaf dtype of an axis: numeric knobs are float32 (the relaxed search moves them continuously),
    categorical codes int32."""
    return np.float32 if axis in NUMERIC_AXES else np.int32


class Design(NamedTuple):
    # Field order is the mixed-radix order (first = slowest). Axes that feed the expensive, shared parts of the
    # model (compute, memory: tp..recompute) come first, network choices next, cheap per-point choices last,
    # so a grid evaluation (evaluate.grid_evaluator) computes each part once per distinct combination.
    tp: jnp.ndarray
    cp: jnp.ndarray
    pp: jnp.ndarray
    dp: jnp.ndarray  # 0 = derived from the GPU count
    ep: jnp.ndarray
    vpp: jnp.ndarray
    mbs: jnp.ndarray
    recompute: jnp.ndarray
    placement: jnp.ndarray
    transport: jnp.ndarray
    qps: jnp.ndarray  # flows per connection (0 = the transport's own)
    channels: jnp.ndarray  # NCCL channels in flight per GPU (0 = the transport's own)
    schedule: jnp.ndarray
    sharding: jnp.ndarray
    dp_algo: jnp.ndarray
    overlap: jnp.ndarray
    dp_sync: jnp.ndarray  # every_step | diloco | streaming (cost/outer_sync.py)
    sync_every: jnp.ndarray  # H: inner steps per outer synchronization (1 = every step)
    outer_precision: jnp.ndarray  # outer gradient bytes on the wire (OUTER_BYTES)
    # infrastructure co-design (cost/provision.py): the cross-building levels' provisioning (0 = the system's)
    xb_bandwidth_GBps: jnp.ndarray  # per GPU per direction
    xb_planes: jnp.ndarray
    xb_oversub: jnp.ndarray
    expert_placement: jnp.ndarray  # ExpertPlacement code (MoE scenarios with an activation trace)
    # heterogeneous buildings (cost/hetero.py): layers per stage and batch per replica across GPU types
    layer_split: jnp.ndarray
    batch_split: jnp.ndarray


def placement_inner_table() -> np.ndarray:
    """inner[p, a, b] = 1 when layout axis b is inside (lower stride than) axis a in placement p."""
    tab = np.zeros((len(PLACEMENTS), 4, 4), np.float32)
    for p, name in enumerate(PLACEMENTS):
        order = name.split("-")
        for a, ax in enumerate(LAYOUT_AXES):
            for b, bx in enumerate(LAYOUT_AXES):
                tab[p, a, b] = order.index(bx) < order.index(ax)
    return tab


def normalize_placement(text: str) -> str:
    """Accept 'tp-cp-dp-pp' or 'tp,cp,dp,pp' (inner to outer); ep is ignored (it lives inside dp)."""
    parts = [t.strip() for t in str(text).replace(",", "-").split("-") if t.strip() and t.strip() != "ep"]
    return "-".join(parts)


@dataclasses.dataclass(frozen=True)
class DesignSpace:
    """Options per axis, in ``AXES`` order. Categorical options are stored as codes."""
    options: tuple  # tuple of tuples, one per axis in AXES
    transport_names: tuple  # names of the scenario's transports (codes index this)

    @staticmethod
    def from_dict(spec: dict, transport_names: tuple, file: str | None = None) -> "DesignSpace":
        unknown = set(spec) - set(AXES)
        if unknown:
            k = sorted(unknown)[0]
            raise ConfigError(file, f"space.{k}", spec[k], "unknown axis", f"axes are: {', '.join(AXES)}")
        defaults = {"tp": [1], "cp": [1], "pp": [1], "dp": ["auto"], "ep": [1], "vpp": [1], "mbs": [1],
                    "qps": ["auto"], "channels": ["auto"], "schedule": ["1f1b"], "recompute": ["none"], "sharding": ["zero1"],
                    "placement": ["tp-cp-dp-pp"], "transport": [transport_names[0]], "dp_algo": ["ring"],
                    "overlap": ["dp"], "dp_sync": ["every_step"], "sync_every": [1], "outer_precision": ["fp32"],
                    "xb_bandwidth_GBps": ["auto"], "xb_planes": ["auto"], "xb_oversub": ["auto"],
                    "expert_placement": ["contiguous"], "layer_split": ["even"], "batch_split": ["even"]}
        options = []
        for axis in AXES:
            raw = spec.get(axis, defaults[axis])
            if not isinstance(raw, (list, tuple)):
                raw = [raw]
            if len(raw) == 0:
                raise ConfigError(file, f"space.{axis}", raw, "needs at least one option")
            options.append(tuple(encode_option(axis, v, transport_names, file) for v in raw))
        return DesignSpace(tuple(options), tuple(transport_names))

    @property
    def radices(self) -> tuple:
        return tuple(len(o) for o in self.options)

    @property
    def size(self) -> int:
        return int(np.prod([len(o) for o in self.options], dtype=object))

    def option_names(self, axis: str) -> list:
        return [decode_option(axis, v, self.transport_names) for v in self.options[AXES.index(axis)]]

    # -- flat index <-> digits <-> Design ------------------------------------------------------------
    def host_tables(self):
        """Per-axis option values as host numpy arrays in the model's dtypes (``axis_dtype``)."""
        return [np.asarray(o, axis_dtype(ax)) for ax, o in zip(AXES, self.options)]

    def _tables(self):
        return [jnp.asarray(t) for t in self.host_tables()]

    def digits_of(self, index: int) -> list:
        """Host-side mixed-radix digits of a Python int (last axis fastest)."""
        if not 0 <= index < self.size:
            raise IndexError(f"design index {index} outside [0, {self.size})")
        digits = []
        for r in reversed(self.radices):
            digits.append(index % r)
            index //= r
        return digits[::-1]

    def decode_digits(self, digits) -> Design:
        """digits: int32 array [..., n_axes] -> Design (gathers option values).

        Host digits (numpy, lists) give numpy leaves, without a device round trip per leaf; device or traced
        digits give device leaves."""
        if isinstance(digits, jax.Array):
            tables, digits = self._tables(), jnp.asarray(digits, jnp.int32)
        else:
            tables, digits = self.host_tables(), np.asarray(digits, np.int32)
        return Design(*[tab[digits[..., i]] for i, tab in enumerate(tables)])

    def decode(self, index) -> Design:
        """Flat index (any shape) -> Design with device leaves; right for every index of the space, or refused.

        * Host indices (Python ints of any size, numpy integer arrays, lists): digits are computed exactly on
          the host (Python / int64 arithmetic), so indices past 2**31 and 2**53 decode right. An index outside
          ``[0, size)`` raises ``IndexError``; a non-integer index raises ``TypeError``.
        * Device (``jax.Array``) and traced indices: digits are computed on device in the array's own integer
          dtype. int32 (JAX's default) holds indices below 2**31 only; for larger starts use ``decode_from``
          (digit-wise addition, any size). Concrete device arrays are range-checked like host indices; traced
          ones cannot be (an out-of-range traced index wraps).
        """
        if isinstance(index, jax.core.Tracer):
            return self.decode_digits(self._device_digits(self.radices, index))
        if isinstance(index, jax.Array):
            self._check_index_range(np.asarray(index), self.size)
            return self.decode_digits(self._device_digits(self.radices, index))
        digits = self._host_digits(self.radices, self.size, index)
        return self.decode_digits(jnp.asarray(digits, jnp.int32))

    @staticmethod
    def _check_index_range(idx: np.ndarray, size: int) -> None:
        if idx.dtype.kind not in "iuO" or (idx.dtype.kind == "O" and not all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in idx.ravel().tolist())):
            raise TypeError(f"design indices must be integers (got dtype {idx.dtype})")
        if idx.size == 0:
            return
        flat = idx.ravel()
        if idx.dtype.kind == "O":  # Python ints: exact at any size
            lo, hi = min(flat.tolist()), max(flat.tolist())
        else:
            lo, hi = int(flat.min()), int(flat.max())
        if lo < 0 or hi >= size:
            bad = lo if lo < 0 else hi
            raise IndexError(f"design index {bad} outside the space [0, {size}); indices are 0 .. {size - 1}")

    @staticmethod
    def _host_digits(radices, size: int, index) -> np.ndarray:
        """Exact mixed-radix digits [..., n_axes] of host indices (Python ints of any size, numpy ints)."""
        if isinstance(index, bool) or isinstance(index, (float, np.floating)):
            raise TypeError(f"design indices must be integers (got {index!r})")
        arr = np.asarray(index, dtype=object if isinstance(index, int) else None)
        if arr.dtype.kind == "b":
            raise TypeError("design indices must be integers (got booleans)")
        DesignSpace._check_index_range(arr, size)
        if size <= 2**62:  # int64 arithmetic is exact for every index of the space
            rest = arr.astype(np.int64)
        else:
            rest = arr.astype(object)
        digits = []
        for r in reversed(radices):
            digits.append(np.asarray(rest % r, dtype=rest.dtype).astype(np.int64))
            rest = np.asarray(rest // r, dtype=rest.dtype)
        return np.stack(digits[::-1], axis=-1) if digits else np.zeros(arr.shape + (0,), np.int64)

    @staticmethod
    def _device_digits(radices, index):
        """Mixed-radix digits of a device/traced integer array, in its own dtype (int32: indices < 2**31)."""
        index = jnp.asarray(index)
        if not jnp.issubdtype(index.dtype, jnp.integer):
            raise TypeError(f"design indices must be integers (got dtype {index.dtype})")
        digits = []
        for r in reversed(radices):
            digits.append(index % r)
            index = index // r
        return jnp.stack(digits[::-1], axis=-1).astype(jnp.int32)

    def decode_from(self, base_digits, offsets):
        """Designs ``start + offsets`` for a start of any size (10**10 and beyond), jittable.

        base_digits: int32 [n_axes], the start's digits from ``digits_of(start)`` (host, Python int), passed
        as an array so a sweep does not recompile per chunk; offsets: int32 array. Digits are added with
        carries on device. Returns (Design, in_range) where in_range flags indices < size.
        """
        digits, in_range = add_digits(self.radices, base_digits, offsets)
        return self.decode_digits(digits), in_range

    def encode(self, design_digits) -> int:
        idx = 0
        for r, d in zip(self.radices, design_digits):
            idx = idx * r + int(d)
        return idx

    # -- single designs from dicts ----------------------------------------------------------------------
    def design(self, values: dict | None = None, base: dict | None = None, file: str | None = None) -> Design:
        """One Design (scalar leaves) from {axis: value}; unspecified axes take ``base`` then the first option.

        Values need not be among the listed options (``sax eval --set tp=16`` works); names must be known.
        """
        merged = {ax: self.option_names(ax)[0] for ax in AXES}
        for src in (base or {}, values or {}):
            for k, v in src.items():
                if k not in AXES:
                    raise ConfigError(file, k, v, "unknown design axis", f"axes are: {', '.join(AXES)}")
                merged[k] = v
        leaves = []
        for ax in AXES:
            code = encode_option(ax, merged[ax], self.transport_names, file)
            leaves.append(jnp.asarray(code, axis_dtype(ax)))
        return Design(*leaves)

    def to_dict(self, design: Design, i: int | None = None) -> dict:
        """Host-readable dict of one design (index i of a batch, or a scalar design)."""
        out = {}
        for ax in AXES:
            v = np.asarray(getattr(design, ax))
            v = v[i] if i is not None else v
            out[ax] = decode_option(ax, v.item(), self.transport_names)
        return out


def add_digits(radices, base_digits, offsets):
    """Mixed-radix digits of base + offsets (int32 offsets, any base), and whether each stays in range."""
    offsets = jnp.asarray(offsets, jnp.int32)
    base_digits = jnp.asarray(base_digits, jnp.int32)
    carry = offsets
    digits = []
    for i in reversed(range(len(radices))):
        d = carry % radices[i] + base_digits[i]
        carry = carry // radices[i] + d // radices[i]
        digits.append(d % radices[i])
    return jnp.stack(digits[::-1], axis=-1), carry == 0


def stack(designs) -> Design:
    return Design(*[jnp.stack([getattr(d, ax) for d in designs]) for ax in AXES])


def encode_option(axis: str, value, transport_names: tuple, file: str | None = None):
    if axis in NUMERIC_AXES:
        if axis in AUTO_AXES and (value == "auto" or value == AUTO):
            return AUTO
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        if isinstance(value, str):
            try:
                value, ok = float(value), True
            except ValueError:
                ok = False
        if not ok or not value >= 1:
            raise ConfigError(file, f"space.{axis}", value, "must be a number >= 1",
                              f"{axis} may also be 'auto'" if axis in AUTO_AXES else "")
        return float(value)
    if axis == "transport":
        names = transport_names
    else:
        names = _GLOBAL_OPTIONS[axis]
    if axis == "placement":
        value = normalize_placement(value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and axis != "placement":
        if 0 <= value < len(names):
            return int(value)
    if value not in names:
        hint = f"options are: {', '.join(names)}" if len(names) < 10 else \
            "a placement orders tp, cp, pp, dp inner to outer, e.g. 'tp-cp-dp-pp'"
        raise ConfigError(file, f"space.{axis}", value, f"unknown {axis}", hint)
    return names.index(value)


def decode_option(axis: str, code, transport_names: tuple):
    if axis in NUMERIC_AXES:
        if axis in AUTO_AXES and code == AUTO:
            return "auto"
        return int(code) if float(code).is_integer() else float(code)
    names = transport_names if axis == "transport" else _GLOBAL_OPTIONS[axis]
    return names[int(code)]
