"""Sweep checkpoints: cursor, running top-k and fronts, counters and the scenario fingerprint, in one file.

Written atomically (temporary file + ``os.replace``), so a kill at any moment leaves either the previous or
the new checkpoint, never a torn one. A resume refuses a checkpoint from a different scenario (fingerprint)
or a different ``top_k`` / front size, since the result would not be the one asked for.
"""
from __future__ import annotations

import json
import os

import numpy as np

FILE = "checkpoint.npz"
VERSION = 1


class ResumeError(ValueError):
    pass


def path(out_dir: str) -> str:
    return os.path.join(out_dir, FILE)


def save(out_dir: str, meta: dict, arrays: dict) -> None:
    os.makedirs(out_dir, exist_ok=True)
    final = path(out_dir)
    tmp = final + f".tmp{os.getpid()}"
    blob = dict(arrays)
    blob["__meta__"] = np.frombuffer(json.dumps(dict(meta, version=VERSION)).encode(), np.uint8)
    with open(tmp, "wb") as fh:
        np.savez(fh, **blob)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)


def load(out_dir: str) -> tuple[dict, dict]:
    p = path(out_dir)
    if not os.path.exists(p):
        raise ResumeError(f"{p}: no checkpoint to resume (run without --resume first)")
    with np.load(p) as z:
        meta = json.loads(bytes(z["__meta__"]).decode())
        arrays = {k: np.array(z[k]) for k in z.files if k != "__meta__"}
    if meta.get("version") != VERSION:
        raise ResumeError(f"{p}: checkpoint version {meta.get('version')} is not {VERSION}")
    return meta, arrays


def check_compatible(meta: dict, expected: dict, where: str) -> None:
    """Refuse to resume when anything that changes the result differs."""
    names = {"fingerprint": "the scenario changed since this sweep started",
             "space_size": "the design space changed", "top_k": "--top differs (with --robust: the larger of --top and --robust-top)", "front_size": "front size differs",
             "objective": "the objective changed", "start": "--start differs", "distinct": "--distinct differs"}
    defaults = {"distinct": False}  # checkpoints written before the key existed
    for key, why in names.items():
        if meta.get(key, defaults.get(key)) != expected.get(key, defaults.get(key)):
            raise ResumeError(f"{where}: cannot resume: {why} ({key}: checkpoint {meta.get(key)!r}, "
                              f"now {expected.get(key)!r}); start a new sweep without --resume or use another --out")
