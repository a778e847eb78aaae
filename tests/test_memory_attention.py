"""Golden values for the attention-efficiency curve, the 16-bit attention/output layer in FP8 training and the
FP8 activation bytes (derived by hand from the formulas' sources, see compute.py and memory.py)."""
import glob

import pytest

from sax_jax.config import load_gpu
from sax_jax.cost.compute import attention_efficiency, head_dim_factor, layer_times, logits_times
from sax_jax.cost.memory import activation_bytes_per_layer
from sax_jax.params import GpuP, gpu_params
from sax_jax.specs import Level, SystemSpec, Training

from conftest import CONFIGS, f32 as F, hand_train


def train(sp=1.0, flash=1.0):
    return hand_train(sp, flash)


def gpu(**kw):
    """A hand-made GpuP: peaks 1e15 (FP8 GEMMs) and 5e14 (16-bit), round efficiencies, no overheads."""
    base = dict(peak_flops=1e15, hbm_bytes=80 * 2**30, hbm_Bps=3e12, gemm_max=0.5, gemm_half_flops=0.0,
                attention_max=0.4, attention_half_seq=512.0, attention_half_seq_full=512.0, peak_flops_16bit=5e14, gemm_input_bytes=1.0,
                memory_bound=0.5, layer_overhead_s=0.0, overlap_slowdown=0.0,
                elementwise_factor=1.0, straggler_cv=0.0)
    base.update(kw)
    return GpuP(**{k: F(v) for k, v in base.items()})


# ---------------------------------------------------------------------------------------------- attention
def test_attention_efficiency_saturates_in_the_key_length():
    # eta = eta_max s/(s + s_half): half of eta_max at s_half, 8/9 of it at 8 s_half, eta_max with s_half = 0
    assert float(attention_efficiency(F(512), F(0.6), F(512))) == pytest.approx(0.3, rel=1e-6)
    assert float(attention_efficiency(F(4096), F(0.6), F(512))) == pytest.approx(0.6 * 8 / 9, rel=1e-6)
    assert float(attention_efficiency(F(4096), F(0.6), F(0.0))) == pytest.approx(0.6, rel=1e-6)


def test_flash_attention_time_golden(m22):
    # 22B: a = 64 heads, d = 96. b = 1, s = 4096, t = 2, c = 2: causal half of 4 b s^2 a d over t c GPUs, at the
    # 16-bit peak 5e14 x 0.4 x (s/c)/((s/c) + 512) = 0.4 x 2048/2560 = 0.32
    b, s, t, c = 1, 4096, 2, 2
    expected = 0.5 * 4 * b * s**2 * 64 * 96 / (t * c) / (5e14 * 0.32)
    lt = layer_times(F(t), F(c), F(b), F(s), m22, gpu(), train())
    assert float(lt.attn_fwd_s) == pytest.approx(expected, rel=1e-5)
    # the FP8 GEMM peak does not touch it: doubling peak_flops leaves the attention core unchanged
    lt2 = layer_times(F(t), F(c), F(b), F(s), m22, gpu(peak_flops=2e15), train())
    assert float(lt2.attn_fwd_s) == pytest.approx(expected, rel=1e-5)
    # ... while the linear layers speed up 2x (gemm_half_flops = 0: pure FLOPs / (peak x gemm_max))
    assert float(lt2.linear_fwd_s) == pytest.approx(float(lt.linear_fwd_s) / 2, rel=1e-5)


def test_head_width_factor_is_the_flashattention3_papers_cudnn_ratio():
    # Shah et al. 2024 (H100 SXM5, 16k keys, TFLOP/s), cuDNN: causal forward 539 (d = 128) / 388 (d = 64),
    # backward 516 / 433; the time of a forward and its 2.5x backward at d = 128 over that at d = 64
    paper = (1 / 539 + 2.5 / 516) / (1 / 388 + 2.5 / 433)
    half = 128 / 3
    assert float(head_dim_factor(F(64), F(half))) == pytest.approx(0.80, rel=1e-6)
    assert float(head_dim_factor(F(64), F(half))) == pytest.approx(paper, abs=0.005)
    assert float(head_dim_factor(F(128), F(half))) == pytest.approx(1.0, rel=1e-6)
    assert float(head_dim_factor(F(256), F(half))) == 1.0  # wider heads gain nothing: capped
    assert float(head_dim_factor(F(64), F(0.0))) == 1.0  # 0: flat in the head width
    speeds = [float(head_dim_factor(F(d), F(half))) for d in (16, 32, 48, 64, 96, 128, 192)]
    assert speeds == sorted(speeds)  # a wider head is never slower


def test_narrow_heads_slow_only_the_attention_core(m22):
    # 22B: d = 96 -> 96/(96 + 128/3) x (128 + 128/3)/128 = 0.9231 of the 128-wide speed; flash forward and
    # backward take 1/0.9231 as long, the GEMMs and the elementwise work do not move
    b, s, t, c = 1, 4096, 2, 2
    k = 96 / (96 + 128 / 3) * (128 + 128 / 3) / 128
    lt = layer_times(F(t), F(c), F(b), F(s), m22, gpu(), train())
    lt_d = layer_times(F(t), F(c), F(b), F(s), m22, gpu(attention_head_dim_half=128 / 3), train())
    assert float(lt_d.attn_fwd_s) == pytest.approx(float(lt.attn_fwd_s) / k, rel=1e-5)
    assert float(lt_d.linear_fwd_s) == float(lt.linear_fwd_s)
    extra = float(lt_d.attn_fwd_s - lt.attn_fwd_s)
    assert float(lt_d.fwd_s - lt.fwd_s) == pytest.approx(extra, rel=1e-4)
    assert float(lt_d.bwd_s - lt.bwd_s) == pytest.approx(2.5 * extra, rel=1e-4)  # FLASH_BWD_RATIO


def test_the_head_width_curve_belongs_to_the_calibrated_kernel():
    # H100: the cuDNN curve (d_half 42.7) for Megatron-TE's kernel; torchtitan's FlashAttention-2 runs flat
    from sax_jax.config import load_frameworks
    h100 = load_gpu(f"{CONFIGS}/hardware/H100-SXM-80GB.yaml")
    system = SystemSpec(name="8xH100", gpu=h100, levels=(Level(name="node", size=8, bandwidth_GBps=450,
                                                                   latency_us=1.0),))
    fws = load_frameworks()
    ref = gpu_params(system, Training(global_batch_sequences=1, seq_len=4096, framework=fws["megatron-te"]))
    fa2 = gpu_params(system, Training(global_batch_sequences=1, seq_len=4096, framework=fws["torchtitan"]))
    assert float(ref.attention_head_dim_half) == pytest.approx(42.7, rel=1e-6)
    assert float(fa2.attention_head_dim_half) == 0.0


def test_head_width_curve_scales_with_the_sms_mma_flops_per_exponential():
    """d_half = c F_mma / (4 F_exp) (compute.py): Blackwell's SM doubles Hopper's MMA FLOPs per clock at the same
    16 exponentials per clock, so B200/GB200 take twice Hopper's d_half. Blackwell Ultra doubles the exponentials,
    but cuDNN's sweep shows it no narrower-head gain (GB300.yaml), so B300/GB300 keep B200's. A 64-wide head on
    B200: 64/(64 + 85.3) x (128 + 85.3)/128 = 0.714 of the 128-wide speed (0.80 on Hopper)."""
    # Hopper's 128/3 (the FA3 paper's cuDNN curve, H100-SXM-80GB.yaml); the YAMLs round to 0.1
    for name, ratio in (("H100-SXM-80GB", 1.0), ("H200", 1.0), ("B200", 2.0), ("GB200", 2.0), ("B300", 2.0),
                        ("GB300", 2.0)):
        d_half = load_gpu(f"{CONFIGS}/hardware/{name}.yaml").efficiency.attention_head_dim_half
        assert d_half == pytest.approx(ratio * 128 / 3, abs=0.05), name
    assert float(head_dim_factor(F(64), F(2 * 128 / 3))) == pytest.approx(
        64 / (64 + 256 / 3) * (128 + 256 / 3) / 128, rel=1e-6)
    assert float(head_dim_factor(F(64), F(2 * 128 / 3))) == pytest.approx(0.7143, abs=1e-4)
    assert float(head_dim_factor(F(64), F(128 / 3))) == pytest.approx(0.8, rel=1e-6)


def test_output_layer_runs_at_the_16bit_peak(m22):
    # 2 b s h V / (t c) FLOPs at 5e14 x gemm_max 0.5; the cross-entropy bytes are memory-bound (peak-free)
    b, s, t, c, h, V = 1, 2048, 2, 1, 6144, 51200
    f0, _ = logits_times(F(t), F(c), F(b), F(s), m22, gpu())
    f1, _ = logits_times(F(t), F(c), F(b), F(s), m22, gpu(peak_flops=4e15))
    ce = 12.0 * b * s * V / (t * c) / (3e12 * 0.5)
    assert float(f0) == pytest.approx(2 * b * s * h * V / (t * c) / (5e14 * 0.5) + ce, rel=1e-5)
    assert float(f1) == pytest.approx(float(f0), rel=1e-6)


def test_fp8_training_keeps_attention_at_the_bf16_peak():
    h100 = load_gpu(f"{CONFIGS}/hardware/H100-SXM-80GB.yaml")
    assert h100.peak_flops_16bit("fp8") == pytest.approx(989.4e12)
    assert h100.peak_flops_16bit("bf16") == pytest.approx(989.4e12)
    assert h100.peak_flops_16bit("fp16") == pytest.approx(989.4e12)
    assert h100.peak_flops_16bit("tf32") == pytest.approx(494.7e12)
    system = SystemSpec(name="1xH100", gpu=h100, levels=(Level(name="node", size=8, bandwidth_GBps=450,
                                                                 latency_us=1.0),))
    p8 = gpu_params(system, Training(global_batch_sequences=1, seq_len=2048, precision="fp8"))
    p16 = gpu_params(system, Training(global_batch_sequences=1, seq_len=2048, precision="bf16"))
    assert float(p8.peak_flops) == pytest.approx(1978.9e12, rel=1e-6)
    assert float(p8.peak_flops_16bit) == pytest.approx(989.4e12, rel=1e-6)
    assert float(p8.gemm_input_bytes) == 1.0 and float(p16.gemm_input_bytes) == 2.0
    assert float(p16.peak_flops_16bit) == pytest.approx(float(p16.peak_flops), rel=1e-6)


def test_every_hardware_file_gives_an_attention_half_seq():
    for f in glob.glob(f"{CONFIGS}/hardware/*.yaml"):
        assert load_gpu(f).efficiency.attention_half_seq > 0, f


# ---------------------------------------------------------------------------------------------- memory
@pytest.mark.parametrize("t", [1, 2, 8])
def test_fp8_activation_bytes_golden(m22, t):
    # 22B is MHA with f = 4h, non-gated. Per layer, SP, flash (no scores), bytes:
    #   16-bit: 10 sbh (norm inputs 4, QKV/fc1 inputs 2+2, masks 1+1) + Q,K,V 6 + O 2 + fc1 out 8 + fc2 in 8 = 34 sbh
    #   FP8 GEMM inputs (1 byte): 8 sbh + Q,K,V 6 + O 2 (+1 FP8 copy) + fc1 out 8 + fc2 in 4 = 29 sbh
    s, b, h = 2048, 4, 6144
    sbh = s * b * h
    act = lambda gin, rec=0: float(activation_bytes_per_layer(  # noqa: E731
        F(b), F(s), F(t), F(1), rec, m22, train(), gemm_input_bytes=gin))
    assert act(2.0) == pytest.approx(34 * sbh / t, rel=1e-6)
    assert act(1.0) == pytest.approx(29 * sbh / t, rel=1e-6)
    # full recompute keeps only the 16-bit layer input, whatever the GEMM precision
    assert act(1.0, rec=2) == pytest.approx(2 * sbh / t, rel=1e-6)


def test_fp8_activation_bytes_gated_mlp(m22):
    # SwiGLU (mats = 3): fc1 output 2f wide (16-bit) + fc2 input f wide: 16-bit 6 sbf, FP8 5 sbf
    gated = m22._replace(mlp_mats=F(3.0))
    s, b, f = 2048, 1, 4 * 6144
    a16 = float(activation_bytes_per_layer(F(b), F(s), F(1), F(1), 0, gated, train(), gemm_input_bytes=2.0))
    a8 = float(activation_bytes_per_layer(F(b), F(s), F(1), F(1), 0, gated, train(), gemm_input_bytes=1.0))
    sbh = s * b * 6144
    # differences: sp part -2 sbh, O +1 sbh, MLP -1 sbf
    assert a16 - a8 == pytest.approx(2 * sbh - sbh + s * b * f, rel=1e-6)


@pytest.mark.parametrize("t", [1, 8])
def test_no_dropout_stores_no_masks(m22, t):
    # Without dropout the two masks (1 + 1 sbh, split by TP with SP) and, unfused, the scores' mask and output
    # (1 + 2 bytes of the 5 per score) are not stored: 34 -> 32 sbh/t with flash; Korthikanti's 5as/h -> 2as/h
    s, b, h, a = 2048, 4, 6144, 64
    sbh = s * b * h
    nodrop = m22._replace(dropout=F(0.0))
    act = lambda m, flash=1.0: float(activation_bytes_per_layer(  # noqa: E731
        F(b), F(s), F(t), F(1), 0, m, train(flash=flash)))
    assert act(m22) == pytest.approx(34 * sbh / t, rel=1e-6)
    assert act(nodrop) == pytest.approx(32 * sbh / t, rel=1e-6)
    assert act(m22, 0.0) - act(nodrop, 0.0) == pytest.approx(2 * sbh / t + 3 * a * s * s * b / t, rel=1e-6)


def test_fp4_training_gemms_at_the_fp4_peak_attention_at_bf16():
    # GB200 NVL72 datasheet: 1,440 PF sparse FP4 per 72 GPUs -> 10 PF dense; NVFP4 saves 0.5 byte per element
    # plus one E4M3 scale per 16 elements for the weight-gradient GEMMs; attention stays at the BF16 peak
    gb = load_gpu(f"{CONFIGS}/hardware/GB200.yaml")
    system = SystemSpec(name="GB200", gpu=gb, levels=(Level(name="node", size=72, bandwidth_GBps=900, latency_us=1.0),))
    p4 = gpu_params(system, Training(global_batch_sequences=1, seq_len=2048, precision="fp4"))
    assert float(p4.peak_flops) == pytest.approx(10_000e12, rel=1e-6)
    assert float(p4.peak_flops_16bit) == pytest.approx(gb.peak_flops("bf16"), rel=1e-6)
    assert float(p4.gemm_input_bytes) == pytest.approx(0.5625)
    h100 = load_gpu(f"{CONFIGS}/hardware/H100-SXM-80GB.yaml")
    assert h100.peak_flops("fp4") == h100.peak_flops("fp8")  # no FP4 tensor cores on Hopper
