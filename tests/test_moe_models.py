"""The MoE models added for issue #14: parameter counts the loader computes against the published totals."""
import pytest

from conftest import bundled_model


@pytest.mark.parametrize("name, total_B, active_B", [
    ("qwen3-235b-a22b", 235.0, 22.0),  # Qwen3 Technical Report, Table 2
    ("llama4-maverick", 400.0, 17.0),  # Meta's Llama 4 announcement
    ("mixtral-8x22B", 141.0, 39.0),  # Mistral AI's Mixtral 8x22B release
    ("deepseek-v3", 671.0, 37.0),  # DeepSeek-V3 Technical Report (main model, MTP excluded)
])
def test_parameter_counts_match_the_published_totals(name, total_B, active_B):
    m = bundled_model(name)
    assert m.n_params / 1e9 == pytest.approx(total_B, rel=0.01)
    # published active counts are rounded to the billion: within half a billion plus 1 %
    assert abs(m.n_active_params / 1e9 - active_B) <= 0.5 + 0.01 * active_B


def test_maverick_interleaves_dense_and_moe_layers_with_a_shared_expert():
    m = bundled_model("llama4-maverick")
    assert m.n_moe_layers == 24 and m.moe.shared_experts == 1 and m.moe.top_k == 1
    assert m.ffn == 16384 and m.moe.expert_ffn == 8192


def test_token_permutation_bytes_by_hand():
    """DeepSeek-V3: 58 of 61 layers are MoE; per token and MoE layer the forward reads the 7168-wide row and writes
    8 copies (permute), then reads 8 expert outputs and writes one row (unpermute), 16-bit: 2 x 9 x 7168 x 2 B."""
    from sax_jax.cost.compute import moe_permute_bytes_per_token
    from sax_jax.params import model_params
    ds = model_params(bundled_model("deepseek-v3"))
    assert float(moe_permute_bytes_per_token(ds)) == pytest.approx(58 / 61 * 2 * 9 * 7168 * 2, rel=1e-5)
    assert float(moe_permute_bytes_per_token(model_params(bundled_model("llama3-8B")))) == 0.0  # dense: none
