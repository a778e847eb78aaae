"""Activation traces: the bundled files, the synthetic generator, the converters and malformed-trace errors."""
import json
import os

import numpy as np
import pytest

from conftest import CONFIGS, bundled_model
from sax_jax.moe import convert, synthetic
from sax_jax.moe.traces import check_against_model, from_fields, load_trace, moe_layer_indices, save_trace
from sax_jax.specs import ConfigError

TRACES = os.path.join(CONFIGS, "traces")
BUNDLED = {"mixtral-8x7B": "mixtral-8x7B.npz", "deepseek-v3": "deepseek-v3.npz"}


@pytest.mark.parametrize("model", sorted(BUNDLED))
def test_bundled_traces_are_small_and_match_their_models(model):
    path = os.path.join(TRACES, BUNDLED[model])
    assert os.path.getsize(path) < 200_000
    m = bundled_model(model)
    t = check_against_model(load_trace(path), m)
    assert t.counts.shape == (m.n_moe_layers, 4, m.moe.experts)
    # every token picks exactly top_k distinct experts in the generator
    np.testing.assert_array_equal(t.counts.sum(-1), np.broadcast_to(m.moe.top_k * t.tokens, t.counts.shape[:2]))
    # the seed's properties: skewed popularity that differs per domain and per layer
    p = t.probabilities
    skew = p.max(-1) / p.mean(-1)
    assert skew.min() > 1.1 and skew.mean() > 1.5
    top = p.argmax(-1)
    assert len(set(top[0].tolist())) > 1 and len(set(top[:, 0].tolist())) > 1


def test_the_generator_reproduces_the_bundled_trace():
    m = bundled_model("mixtral-8x7B")
    fields = synthetic.synthetic_fields(m.name, 8, 2, moe_layer_indices(m))
    bundled = load_trace(os.path.join(TRACES, BUNDLED["mixtral-8x7B"]))
    np.testing.assert_array_equal(fields["counts"], bundled.counts)
    np.testing.assert_array_equal(fields["affinity"], bundled.affinity)


def test_moe_layers_follow_dense_prefix_and_interleave():
    assert moe_layer_indices(bundled_model("deepseek-v3"))[:2] == [3, 4]
    maverick = moe_layer_indices(bundled_model("llama4-maverick"))
    assert maverick[:3] == [1, 3, 5] and len(maverick) == 24


def _fields(**over):
    base = dict(model="mixtral-8x7B", experts=8, top_k=2, domains=["code", "chat"], tokens=[10, 20],
                layers=list(range(32)), counts=np.full((32, 2, 8), 2, np.int64).tolist())
    base.update(over)
    return base


def test_json_and_npz_round_trip(tmp_path):
    for ext in ("json", "npz"):
        path = str(tmp_path / f"t.{ext}")
        save_trace(_fields(), path)
        t = check_against_model(load_trace(path), bundled_model("mixtral-8x7B"))
        assert t.counts.sum() == 32 * 2 * 8 * 2 and t.domains == ("code", "chat")


@pytest.mark.parametrize("over, field", [
    (dict(counts=np.full((32, 2, 7), 1).tolist()), "counts"),  # wrong expert count
    (dict(counts=np.where(np.arange(8) == 3, -1, 1) * np.ones((32, 2, 1), int)), "counts[0, 0, 3]"),  # negative
    (dict(counts=np.full((32, 2, 8), 11).tolist()), "counts[0][0][0]"),  # above the domain's tokens
    (dict(tokens=[10]), "tokens"),
    (dict(top_k=9), "top_k"),
])
def test_malformed_fields_name_the_file_and_field(over, field):
    with pytest.raises(ConfigError) as err:
        from_fields(_fields(**over), "bad.json")
    assert "bad.json" in str(err.value) and f"'{field}" in str(err.value)


@pytest.mark.parametrize("over, field", [
    (dict(layers=list(range(31)), counts=np.ones((31, 2, 8), int).tolist()), "layers"),  # a layer missing
    (dict(model="deepseek-v3"), "model"),  # another model's trace
    (dict(experts=16, counts=np.ones((32, 2, 16), int).tolist()), "experts"),  # wrong expert count for the model
])
def test_a_trace_of_the_wrong_shape_for_the_model_is_an_error(tmp_path, over, field):
    path = str(tmp_path / "t.json")
    with open(path, "w") as f:
        json.dump({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in _fields(**over).items()}, f)
    with pytest.raises(ConfigError) as err:
        check_against_model(load_trace(path), bundled_model("mixtral-8x7B"))
    assert path in str(err.value) and f"key '{field}'" in str(err.value)


def test_missing_layer_message_names_the_layer(tmp_path):
    path = str(tmp_path / "t.json")
    layers = [i for i in range(32) if i != 7]
    save_trace(_fields(layers=layers, counts=np.ones((31, 2, 8), int)), path)
    with pytest.raises(ConfigError, match="MoE layer 7 is missing"):
        check_against_model(load_trace(path), bundled_model("mixtral-8x7B"))


def test_vllm_routed_experts_aggregate_by_hand():
    # 3 tokens of "code", 2 MoE layers, top-2
    code = np.array([[[0, 1], [2, 3]], [[0, 2], [2, 1]], [[3, 1], [0, 2]]])
    chat = np.array([[[1, 0], [3, 2]]])
    f = convert.from_routed_experts([("code", code), ("chat", chat)], "m", 4, 2, [0, 1])
    t = from_fields(f)
    assert t.domains == ("code", "chat") and t.tokens.tolist() == [3, 1]
    np.testing.assert_array_equal(t.counts[0, 0], [2, 2, 1, 1])  # layer 0, code: 0,1 | 0,2 | 3,1
    np.testing.assert_array_equal(t.counts[1, 0], [1, 1, 3, 1])  # layer 1, code: 2,3 | 2,1 | 0,2
    # affinity: token (0,1)->(2,3) gives 0->2, 0->3, 1->2, 1->3; summed over every token
    assert t.affinity[0, 0, 2] == 2 + 0 + 1 and t.affinity[0, 1, 3] == 1 + 0 + 0 + 1  # chat's 1->3 too
    assert t.affinity.sum() == 4 * 4


def test_vllm_jsonl_and_bad_ids(tmp_path):
    path = str(tmp_path / "v.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps({"domain": "math", "routed_experts": [[[0, 1]], [[1, 2]]]}) + "\n")
    t = from_fields(convert.read_vllm_jsonl(path, "m", 3, 2, [5]))
    np.testing.assert_array_equal(t.counts[0, 0], [1, 2, 1])
    with open(path, "w") as f:
        f.write(json.dumps({"domain": "math", "routed_experts": [[[0, 7]]]}) + "\n")
    with pytest.raises(ConfigError, match="expert ids must be integers in"):
        convert.read_vllm_jsonl(path, "m", 3, 2, [5])


def test_megatron_routing_trace_assumed_format(tmp_path):
    path = str(tmp_path / "r.jsonl")
    lines = [{"iteration": 1, "layer_number": 1, "topk_indices": [[0, 1], [1, 2]], "domain": "code"},
             {"iteration": 1, "layer_number": 2, "topk_indices": [[2, 1], [0, 2]], "domain": "code"},
             {"iteration": 2, "layer_number": 1, "topk_indices": [[3, 0]]}]
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    t = from_fields(convert.read_megatron_jsonl(path, "m", 4, 2, [0, 1]))
    assert t.domains == ("code", "general") and t.tokens.tolist() == [2, 1]
    np.testing.assert_array_equal(t.counts[1, 0], [1, 1, 2, 0])
    with open(path, "w") as f:
        f.write(json.dumps({"layer_number": 9, "topk_indices": [[0, 1]]}) + "\n")
    with pytest.raises(ConfigError, match="line 1.layer_number"):
        convert.read_megatron_jsonl(path, "m", 4, 2, [0, 1])
