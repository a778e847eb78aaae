"""What communication overlapped with compute costs. Every term that hides a collective under compute goes
through ``exposed_s``, so the rule and its price live in one place.

A collective of ``comm_s`` seconds overlapped with a compute window of ``window_s`` seconds is exposed for
``max(comm_s - window_s, floor)``, never more than ``comm_s``. The floor is the part no schedule can hide: with
the communication split into ``chunks`` pieces (buckets, layers), the last piece waits for the last compute
(Megatron's bucketed --overlap-grad-reduce; PyTorch FSDP's per-layer prefetch), so floor = comm_s / chunks.

Overlap is not free: while a collective runs beside the GEMMs its kernels hold SMs (NCCL runs one thread block
per channel, each on its own SM) and share HBM bandwidth, so the compute it hides under slows down. To first
order the compute loses the collective's SM share ``slowdown`` = comm SMs / SMs for as long as both run, i.e.
for the hidden part of the collective: cost = exposed + slowdown x hidden. (The interference of concurrent
collective kernels with GEMMs is the subject of Wang et al. 2023, "Overlap communication with dependent
computation via decomposition", and Pati et al. 2024, "T3", both ASPLOS.) The SM share is the first-order part
and a lower bound: the collective's copies also take HBM and L2 bandwidth from the kernels beside it and power
from the shared limit. ``nccl_price`` adds that as one fitted fraction (GPU YAML ``efficiency.overlap_contention``,
benchmarks/calibrate.py --overlap). Measured on A100, H100, MI210 and MI250 running GPT and Llama layers beside
their collectives, compute slows by 18.9% on average and 40% at most (Sahu et al. 2025, "Characterizing
compute-communication overlap in GPU-accelerated distributed deep learning", arXiv 2507.03114), against an SM
share of 12% (H100) to 15% (A100) for NCCL's 16 SMs.
"""
import jax.numpy as jnp


def exposed_s(comm_s, window_s, overlapped, chunks=None, slowdown=0.0):
    """Seconds the step pays for ``comm_s`` of communication overlapped (where ``overlapped``) with
    ``window_s`` of compute: the exposed part plus the compute slowdown while the rest hides."""
    floor = 0.0 if chunks is None else comm_s / chunks
    # max(c - w, floor) overlapped, c otherwise, written with the selects on the operands: in a sweep's grid the
    # selects then stay on the small (per-layout) arrays instead of the per-design ones (same values; measured
    # 14% faster blocks on CPU than selecting between two per-design results)
    exposed = jnp.maximum(comm_s - jnp.where(overlapped, window_s, 0.0), jnp.where(overlapped, floor, comm_s))
    return exposed + slowdown * (comm_s - exposed)


def nccl_price(gpu):
    """Fraction the compute slows while an NCCL collective (data-parallel, FSDP, context-parallel ring, expert
    all-to-all, outer sync) hides under it: its SM share plus the fitted contention beyond the SMs. Tensor
    parallelism's Userbuffers overlap counts its own SMs per mechanism and adds the same contention
    (tensor_parallel.py)."""
    return gpu.overlap_slowdown + gpu.overlap_contention


# NCCL point-to-point (ncclSend / ncclRecv) runs on the channels it opens per peer, one thread block each: two per
# network peer by default (NCCL_NCHANNELS_PER_NET_PEER = 2; ncclTopoGetNchannels, src/graph/paths.cc), and a
# communicator that reaches any peer over the network keeps every peer at that minimum (p2pnChannelsPerPeer), not
# the 16 SMs of a collective's channels over 8 NICs (GPU YAML comm_sms).
P2P_SMS_PER_PEER = 2.0


def p2p_price(gpu, peers):
    """nccl_price for point-to-point transfers with ``peers`` peers at once (a ring step's send and receive: 2):
    their own channels' SM share plus the same fitted contention."""
    return peers * P2P_SMS_PER_PEER * gpu.sm_share + gpu.overlap_contention
