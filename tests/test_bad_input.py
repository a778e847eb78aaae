"""Bad-input catalog: every case exits 2 with a one-line message naming what is wrong; never a traceback.

Scenario, system, hardware, model and transport files are mutated one field at a time; every CLI flag gets
out-of-range values. All run the CLI in-process (``sax_jax.cli.main``) and fail before any JIT compilation,
so the whole catalog takes seconds.
"""
import os
import re

import pytest

from sax_jax.cli import main

from conftest import CONFIGS, DEFAULT

GPU = open(os.path.join(CONFIGS, "hardware", "H100-SXM-80GB.yaml")).read()
SYSTEM = open(os.path.join(CONFIGS, "systems", "h100-building.yaml")).read()
MODEL = open(os.path.join(CONFIGS, "models", "llama3-8B.yaml")).read()
MOE_MODEL = open(os.path.join(CONFIGS, "models", "mixtral-8x7B.yaml")).read()
TRANSPORTS = open(os.path.join(CONFIGS, "network", "transports.yaml")).read()
SCENARIO = """name: t
model: @MODEL@
system: @SYSTEM@
transports: @TRANSPORTS@
training: {global_batch_sequences: 1024, seq_len: 4096}
space: {tp: [1, 2, 4, 8], pp: [1, 2], schedule: [1f1b, gpipe]}
baselines:
  prod: {tp: 8, pp: 2, schedule: 1f1b}
"""

# (id, file, old, new, text that must appear in the message: the key, or the problem)
YAML_CASES = [
    # training (scenario file)
    ("batch-1e30", "scenario", "global_batch_sequences: 1024", "global_batch_sequences: 1.0e+30",
     "training.global_batch_sequences"),
    ("batch-zero", "scenario", "global_batch_sequences: 1024", "global_batch_sequences: 0",
     "training.global_batch_sequences"),
    ("batch-negative", "scenario", "global_batch_sequences: 1024", "global_batch_sequences: -5",
     "training.global_batch_sequences"),
    ("batch-fraction", "scenario", "global_batch_sequences: 1024", "global_batch_sequences: 1024.5",
     "training.global_batch_sequences"),
    ("seq-fraction", "scenario", "seq_len: 4096", "seq_len: 8192.5", "training.seq_len"),
    ("seq-nan", "scenario", "seq_len: 4096", "seq_len: .nan", "training.seq_len"),
    ("seq-inf", "scenario", "seq_len: 4096", "seq_len: .inf", "training.seq_len"),
    ("seq-text", "scenario", "seq_len: 4096", "seq_len: long", "training.seq_len"),
    ("precision", "scenario", "seq_len: 4096", "seq_len: 4096, precision: fp64", "training.precision"),
    ("param-bytes-zero", "scenario", "seq_len: 4096", "seq_len: 4096, param_bytes: 0", "training.param_bytes"),
    ("optimizer-bytes-negative", "scenario", "seq_len: 4096", "seq_len: 4096, optimizer_bytes_per_param: -1",
     "training.optimizer_bytes_per_param"),
    ("bool-as-text", "scenario", "seq_len: 4096", "seq_len: 4096, allow_bounded_loss: maybe",
     "training.allow_bounded_loss"),
    ("cudnn-norm-as-number", "scenario", "seq_len: 4096", "seq_len: 4096, cudnn_norm: 1", "training.cudnn_norm"),
    ("training-not-mapping", "scenario", "training: {global_batch_sequences: 1024, seq_len: 4096}",
     "training: [1024, 4096]", "'training'"),
    ("training-unknown-key", "scenario", "seq_len: 4096", "seq_len: 4096, seqlen: 4096", "training.seqlen"),
    ("training-missing-key", "scenario", "global_batch_sequences: 1024, ", "", "training.global_batch_sequences"),
    # YAML itself
    ("duplicate-top-key", "scenario", "name: t\n", "name: t\nname: u\n", "duplicate key"),
    ("duplicate-space-key", "scenario", "space: {tp: [1, 2, 4, 8],", "space: {tp: [1, 2, 4, 8], tp: [8],",
     "'space.tp': duplicate key"),
    ("duplicate-block-key", "scenario", "baselines:\n", "space: {tp: [8]}\nbaselines:\n",
     "'space': duplicate key (lines 6 and 7)"),
    ("python-object-tag", "scenario", "name: t", "name: !!python/object:os.system {}", "unsafe"),
    ("python-name-tag", "scenario", "name: t", "name: !!python/name:os.system", "unsafe"),
    ("custom-tag", "scenario", "name: t", "name: !secret t", "unsafe"),
    ("syntax", "scenario", "space: {tp:", "space: {tp:: [", "YAML syntax error"),
    ("empty-file", "scenario", None, "", "expected a mapping"),
    ("top-level-list", "scenario", None, "- 1\n- 2\n", "expected a mapping"),
    ("unknown-top-key", "scenario", "name: t", "name: t\nnmae: u", "'nmae'"),
    ("name-not-string", "scenario", "name: t", "name: [1, 2]", "'name'"),
    ("objective", "scenario", "name: t", "name: t\nobjective: speed", "'objective'"),
    # space
    ("space-not-mapping", "scenario", "space: {tp: [1, 2, 4, 8], pp: [1, 2], schedule: [1f1b, gpipe]}",
     "space: [1, 2]", "'space'"),
    ("space-unknown-axis", "scenario", "pp: [1, 2]", "ppp: [1, 2]", "space.ppp"),
    ("space-tp-fraction", "scenario", "tp: [1, 2, 4, 8]", "tp: [1.5, 8]", "space.tp"),
    ("space-tp-zero", "scenario", "tp: [1, 2, 4, 8]", "tp: [0, 8]", "space.tp"),
    ("space-tp-1e30", "scenario", "tp: [1, 2, 4, 8]", "tp: [8, 1.0e+30]", "space.tp"),
    ("space-tp-twice", "scenario", "tp: [1, 2, 4, 8]", "tp: [1, 2, 8, 8]", "space.tp"),
    ("space-tp-empty", "scenario", "tp: [1, 2, 4, 8]", "tp: []", "space.tp"),
    ("space-vpp-beyond-layers", "scenario", "pp: [1, 2]", "pp: [1, 2], vpp: [1, 1000]", "space.vpp"),
    ("space-mbs-beyond-batch", "scenario", "pp: [1, 2]", "pp: [1, 2], mbs: [1, 4096]", "space.mbs"),
    ("space-qps-huge", "scenario", "pp: [1, 2]", "pp: [1, 2], qps: [1, 100000]", "space.qps"),
    ("space-schedule", "scenario", "schedule: [1f1b, gpipe]", "schedule: [1f1b, pipedream]", "space.schedule"),
    ("space-placement", "scenario", "pp: [1, 2]", "pp: [1, 2], placement: [tp-xx-dp-pp]", "space.placement"),
    ("space-transport", "scenario", "pp: [1, 2]", "pp: [1, 2], transport: [tcp]", "space.transport"),
    ("space-schedule-code", "scenario", "schedule: [1f1b, gpipe]", "schedule: [1f1b, 0]", "space.schedule"),
    ("baseline-schedule-code", "scenario", "schedule: 1f1b}", "schedule: 2}", "baselines.prod.schedule"),
    ("baselines-zero", "scenario", "baselines:\n  prod: {tp: 8, pp: 2, schedule: 1f1b}", "baselines: 0",
     "'baselines'"),
    ("default-baseline-list", "scenario", "baselines:", "default_baseline: [prod]\nbaselines:", "default_baseline"),
    ("heads-zero", "model", "heads: 32", "heads: 0", "'heads'"),
    ("space-nested", "scenario", "pp: [1, 2]", "pp: [[1, 2]]", "space.pp"),
    ("space-no-factoring", "scenario", "tp: [1, 2, 4, 8], pp: [1, 2]", "tp: [3], pp: [5]", "space.tp/cp/pp/dp"),
    # baselines
    ("baseline-bad-schedule", "scenario", "schedule: 1f1b}", "schedule: pipedream}", "baselines.prod.schedule"),
    ("baseline-tp-heads", "scenario", "prod: {tp: 8,", "prod: {tp: 16,", "baselines.prod.tp"),
    ("baseline-tp-fraction", "scenario", "prod: {tp: 8,", "prod: {tp: 2.5,", "baselines.prod.tp"),
    ("baseline-unknown-axis", "scenario", "prod: {tp: 8,", "prod: {tpp: 8,", "tpp"),
    ("baseline-not-mapping", "scenario", "prod: {tp: 8, pp: 2, schedule: 1f1b}", "prod: fast", "baselines.prod"),
    ("default-baseline", "scenario", "baselines:", "default_baseline: nope\nbaselines:", "default_baseline"),
    ("baselines-not-mapping", "scenario", "  prod: {tp: 8, pp: 2, schedule: 1f1b}\n", "  - 1\n", "'baselines'"),
    # references
    ("model-missing-file", "scenario", "model: @MODEL@", "model: nothere.yaml", "'model'"),
    ("model-not-path", "scenario", "model: @MODEL@", "model: 42", "'model'"),
    ("system-missing-file", "scenario", "system: @SYSTEM@", "system: nothere.yaml", "'system'"),
    # system levels
    ("latency-1e30", "system", "latency_us: 8", "latency_us: 1.0e+30", "levels.building.latency_us"),
    ("latency-zero", "system", "latency_us: 8", "latency_us: 0", "levels.building.latency_us"),
    ("bandwidth-1e-30", "system", "bandwidth_GBps: 50", "bandwidth_GBps: 1.0e-30", "levels.building.bandwidth_GBps"),
    ("bandwidth-negative", "system", "bandwidth_GBps: 50", "bandwidth_GBps: -50", "levels.building.bandwidth_GBps"),
    ("size-fraction", "system", "size: 1024", "size: 1024.5", "levels.building.size"),
    ("size-zero", "system", "size: 1024", "size: 0", "levels.building.size"),
    ("size-huge", "system", "size: 1024", "size: 1.0e+12", "levels.building.size"),
    ("size-unfactorable", "system", "size: 1024", "size: 1023", "levels.building.size"),
    ("oversubscription", "system", "oversubscription: 1", "oversubscription: 0.5", "levels.building.oversubscription"),
    ("loss-rate", "system", "loss_rate: 0.0", "loss_rate: 0.7", "levels.building.loss_rate"),
    ("paths-fraction", "system", "paths: 1 ", "paths: 2.5 ", "levels.building.paths"),
    ("mtu-tiny", "system", "loss_rate: 0.0", "loss_rate: 0.0\n    mtu_bytes: 10", "levels.building.mtu_bytes"),
    ("failure-rate", "system", "loss_rate: 0.0", "loss_rate: 0.0\n    failure_rate_per_hour: -1",
     "levels.building.failure_rate_per_hour"),
    ("level-name", "system", "name: building", "name: datacenter", "levels.datacenter.name"),
    ("level-unknown-key", "system", "loss_rate: 0.0", "loss_rate: 0.0\n    lossrate: 0.1", "levels.building.lossrate"),
    ("levels-not-list", "system", None, "name: x\ngpu: @GPU@\nlevels: 8\n", "'levels'"),
    ("system-unknown-key", "system", "name: h100-building", "name: h100-building\nfabric: ib", "'fabric'"),
    # hardware
    ("hbm-negative", "gpu", "hbm_GiB: 80", "hbm_GiB: -1", "hbm_GiB"),
    ("memory-reserve", "gpu", "hbm_GiB: 80", "hbm_GiB: 80\nmemory_reserve_GiB: -1", "memory_reserve_GiB"),
    ("gemm-max", "gpu", "gemm_max: 0.7", "gemm_max: 2.", "efficiency.gemm_max"),  # a fitted 0.7xx -> 2.xx
    ("efficiency-status", "gpu", "status: calibrated", "status: guessed", "efficiency.status"),
    ("peak-missing", "gpu", "  bf16: 989.4", "  bf17: 989.4", "peak_tflops"),
    ("peak-text", "gpu", "  bf16: 989.4", "  bf16: fast", "peak_tflops.bf16"),
    ("peak-1e30", "gpu", "  bf16: 989.4", "  bf16: 1.0e+30", "peak_tflops.bf16"),
    ("nvl-domain-fraction", "gpu", "nvl_domain_gpus: 8", "nvl_domain_gpus: 7.5", "nvl_domain_gpus"),
    ("mamf-above-peak", "gpu", "fp8: 1402.6}", "fp8: 2500.0}", "mamf_tflops.fp8"),
    ("mamf-unknown-precision", "gpu", "fp8: 1402.6}", "fp4: 1402.6}", "mamf_tflops.fp4"),
    ("mamf-text", "gpu", "fp8: 1402.6}", "fp8: fast}", "mamf_tflops.fp8"),
    ("mamf-not-mapping", "gpu", "mamf_tflops: {bf16: 794.5, fp8: 1402.6}", "mamf_tflops: [794.5, 1402.6]",
     "mamf_tflops"),
    # model
    ("layers-fraction", "model", "layers: 32", "layers: 32.5", "'layers'"),
    ("kv-heads", "model", "kv_heads: 8", "kv_heads: 7", "'kv_heads'"),
    ("vocab-zero", "model", "vocab: 128256", "vocab: 0", "'vocab'"),
    ("hidden-1e30", "model", "hidden: 4096", "hidden: 1.0e+30", "'hidden'"),
    ("gated-text", "model", "gated_mlp: true", "gated_mlp: sometimes", "'gated_mlp'"),
    ("moe-experts-zero", "moe_model", "experts: 8", "experts: 0", "moe.experts"),
    ("moe-topk", "moe_model", "top_k: 2", "top_k: 9", "moe.top_k"),
    ("moe-imbalance", "moe_model", "imbalance: 1.0", "imbalance: 0.5", "moe.imbalance"),
    # transports
    ("qps-zero", "transports", "qps: 4\n", "qps: 0\n", "transports.ecmp_qp4.qps"),
    ("channels-fraction", "transports", "channels: 16\n", "channels: 2.5\n", "channels"),
    ("tolerated-loss", "transports", "tolerated_loss: 1.0e-3", "tolerated_loss: 1.0",
     "transports.bounded_loss.tolerated_loss"),
    ("loss-recovery", "transports", "  loss_recovery: go_back_n", "  loss_recovery: pray", "loss_recovery"),
    ("load-balancing", "transports", "  load_balancing: ecmp", "  load_balancing: random", "load_balancing"),
    ("transports-empty", "transports", None, "{}\n", "transport"),
    ("window-1e30", "transports", "window_bytes_per_channel: 4194304", "window_bytes_per_channel: 1.0e+30",
     "window_bytes_per_channel"),
]


def _write(path, text):
    with open(path, "w") as fh:
        fh.write(text)
    return str(path)


def _mutate(text, old, new, case_id):
    if old is None:
        return new
    assert old in text, f"catalog case {case_id}: {old!r} not in the file (the case would test nothing)"
    return text.replace(old, new, 1)


def _scenario_for(tmp_path, kind, old, new, case_id):
    files = {"gpu": GPU, "system": SYSTEM, "model": MODEL, "moe_model": MOE_MODEL, "transports": TRANSPORTS}
    if kind in files:
        files[kind] = _mutate(files[kind], old, new, case_id)
    gpu = _write(tmp_path / "gpu.yaml", files["gpu"])
    files["system"] = files["system"].replace("../hardware/H100-SXM-80GB.yaml", gpu).replace("@GPU@", gpu)
    system = _write(tmp_path / "system.yaml", files["system"])
    model = _write(tmp_path / "model.yaml", files["moe_model" if kind == "moe_model" else "model"])
    transports = _write(tmp_path / "transports.yaml", files["transports"])
    text = SCENARIO
    if kind == "scenario":
        text = _mutate(text, old, new, case_id)
    text = text.replace("@MODEL@", model).replace("@SYSTEM@", system).replace("@TRANSPORTS@", transports)
    return _write(tmp_path / "scenario.yaml", text)


def _expect_user_error(capsys, argv, *must_contain):
    rc = main(list(argv))
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text and "internal error" not in text, text
    assert rc == 2, (rc, text)
    assert out.err.strip(), "no message on stderr"
    for m in must_contain:
        assert m in out.err, (m, out.err)
    return out.err


def test_base_scenario_is_accepted(tmp_path, capsys):
    """The unmutated files load: every case below fails because of its one change."""
    path = _scenario_for(tmp_path, "none", None, None, "base")
    assert main(["space", path, "--json"]) == 0
    assert '"size": 16' in capsys.readouterr().out


@pytest.mark.parametrize("case_id,kind,old,new,expect", YAML_CASES, ids=[c[0] for c in YAML_CASES])
def test_bad_config_file(tmp_path, capsys, case_id, kind, old, new, expect):
    path = _scenario_for(tmp_path, kind, old, new, case_id)
    _expect_user_error(capsys, ["space", path], expect)


# (id, argv, text that must appear in the message); DEFAULT is the bundled default scenario
def _flag_cases(tmp):
    existing = _write(tmp / "a_file.txt", "x")
    return [
        ("sweep-top-0", ["sweep", DEFAULT, "--top", "0"], "--top"),
        ("sweep-top-negative", ["sweep", DEFAULT, "--top", "-1"], "--top"),
        ("sweep-top-huge", ["sweep", DEFAULT, "--top", "1e9"], "--top"),
        ("sweep-top-text", ["sweep", DEFAULT, "--top", "ten"], "--top"),
        ("sweep-top-fraction", ["sweep", DEFAULT, "--top", "2.5"], "--top"),
        ("sweep-out-is-file", ["sweep", DEFAULT, "--out", existing], "--out"),
        ("sweep-out-empty", ["sweep", DEFAULT, "--out", ""], "--out"),
        ("sweep-devices-0", ["sweep", DEFAULT, "--devices", "0"], "--devices"),
        ("sweep-devices-5", ["sweep", DEFAULT, "--devices", "5000"], "--devices"),
        ("sweep-devices-negative", ["sweep", DEFAULT, "--devices", "-1"], "--devices"),
        ("sweep-plot-missing-dir", ["sweep", DEFAULT, "--plot", "/nonexistent/x.png"], "--plot"),
        ("sweep-plot-type", ["sweep", DEFAULT, "--plot", str(tmp / "x.txt")], "--plot"),
        ("sweep-plot-dir", ["sweep", DEFAULT, "--plot", str(tmp)], "--plot"),
        ("sweep-resume-no-out", ["sweep", DEFAULT, "--resume"], "--resume"),
        ("sweep-checkpoint-negative", ["sweep", DEFAULT, "--checkpoint-every", "-1"], "--checkpoint-every"),
        ("sweep-checkpoint-huge", ["sweep", DEFAULT, "--checkpoint-every", "1e9"], "--checkpoint-every"),
        ("sweep-checkpoint-nan", ["sweep", DEFAULT, "--checkpoint-every", "nan"], "--checkpoint-every"),
        ("sweep-max-designs-0", ["sweep", DEFAULT, "--max-designs", "0"], "--max-designs"),
        ("sweep-max-designs-fraction", ["sweep", DEFAULT, "--max-designs", "1.5"], "--max-designs"),
        ("sweep-chunk-negative", ["sweep", DEFAULT, "--chunk", "-1"], "--chunk"),
        ("sweep-process-id-alone", ["sweep", DEFAULT, "--process-id", "1"], "--process-id"),
        ("sweep-process-id-range", ["sweep", DEFAULT, "--coordinator", "h:1234", "--num-processes", "2",
                                    "--process-id", "2"], "--process-id"),
        ("sweep-num-processes-0", ["sweep", DEFAULT, "--coordinator", "h:1234", "--num-processes", "0",
                                   "--process-id", "0"], "--num-processes"),
        ("sweep-coordinator-port", ["sweep", DEFAULT, "--coordinator", "host", "--num-processes", "2",
                                    "--process-id", "0"], "--coordinator"),
        ("search-budget-0", ["search", DEFAULT, "--budget", "0"], "--budget"),
        ("search-budget-negative", ["search", DEFAULT, "--budget", "-1"], "--budget"),
        ("search-budget-1e12", ["search", DEFAULT, "--method", "random", "--budget", "1000000000000"], "--budget"),
        ("search-budget-text", ["search", DEFAULT, "--budget", "lots"], "--budget"),
        ("search-seed-negative", ["search", DEFAULT, "--seed", "-1"], "--seed"),
        ("search-seed-huge", ["search", DEFAULT, "--seed", "1e20"], "--seed"),
        ("search-strategy-relaxed", ["search", DEFAULT, "--method", "relaxed", "--strategy", "de"], "--strategy"),
        ("search-strategy-random", ["search", DEFAULT, "--method", "random", "--strategy", "ga"], "--strategy"),
        ("search-strategy-unknown", ["search", DEFAULT, "--strategy", "pso"], "--strategy"),
        ("search-method-unknown", ["search", DEFAULT, "--method", "annealing"], "--method"),
        ("search-exhaustive-budget", ["search", DEFAULT, "--method", "exhaustive", "--budget", "10"], "--budget"),
        ("eval-set-tp-0", ["eval", DEFAULT, "--set", "tp=0"], "--set tp"),
        ("eval-set-tp-fraction", ["eval", DEFAULT, "--set", "tp=1.5"], "--set tp"),
        ("eval-set-tp-1e30", ["eval", DEFAULT, "--set", "tp=1e30"], "--set tp"),
        ("eval-set-pp-text", ["eval", DEFAULT, "--set", "pp=many"], "pp"),
        ("eval-set-no-equals", ["eval", DEFAULT, "--set", "tp"], "--set"),
        ("eval-set-unknown-axis", ["eval", DEFAULT, "--set", "zz=1"], "--set"),
        ("eval-set-schedule-code", ["eval", DEFAULT, "--set", "schedule=0"], "--set schedule"),
        ("eval-set-schedule", ["eval", DEFAULT, "--set", "schedule=pipedream"], "pipedream"),
        ("eval-set-twice", ["eval", DEFAULT, "--set", "tp=8", "--set", "tp=4"], "--set tp"),
        ("eval-set-mbs-beyond-batch", ["eval", DEFAULT, "--set", "mbs=100000"], "--set mbs"),
        ("eval-baseline-unknown", ["eval", DEFAULT, "--baseline", "nope"], "--baseline"),
        ("scenario-is-directory", ["eval", CONFIGS], "is a directory"),
        ("scenario-missing", ["space", "/nonexistent/scenario.yaml"], "file not found"),
        ("scenario-unknown-name", ["sweep", "defualt"], "bundled scenarios"),
        ("scenario-empty", ["space", ""], "scenario"),
        ("no-command", [], "command"),
        ("unknown-command", ["explode"], "explode"),
        ("validate-missing-csv", ["validate", "/nonexistent/my_runs.csv"], "my_runs.csv"),
    ]


FLAG_IDS = [c[0] for c in _flag_cases(__import__("pathlib").Path("/tmp"))]


@pytest.mark.parametrize("case_id", FLAG_IDS)
def test_bad_flag(tmp_path, capsys, case_id):
    case = {c[0]: c for c in _flag_cases(tmp_path)}[case_id]
    _expect_user_error(capsys, case[1], case[2])


def test_catalog_size():
    assert len(YAML_CASES) + len(FLAG_IDS) >= 60


def test_subprocess_no_traceback(tmp_path):
    """The console entry point itself (a real process): a bad value is exit 2 and one line."""
    import subprocess
    import sys
    path = _scenario_for(tmp_path, "scenario", "seq_len: 4096", "seq_len: 8192.5", "subprocess")
    out = subprocess.run([sys.executable, "-m", "sax_jax.cli", "space", path], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "training.seq_len" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert re.search(r"8192\.5", out.stderr)
