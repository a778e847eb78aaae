"""`sax validate` builds each run's model with the embedding tie of the real model (validation.tied_embeddings_of):
the bundled model file's `tied_embeddings`, else UNTIED_PREFIXES. The CSV has no column for it, and every run had
been built with the ModelSpec default (tied), so untied models at PP 1 held one vocab x hidden matrix too few."""
import pytest

from sax_jax import validation as V
from sax_jax.cost.memory import params_per_gpu
from sax_jax.params import build_params


@pytest.mark.parametrize("name, tied", [
    ("llama3-8B", False),       # model file
    ("gpt-oss-120b", False),    # model file
    ("deepseek-v3", False),     # model file
    ("gpt3-175B", True),        # model file: Megatron GPT default
    ("qwen3-30b-a3b", False),   # no file: Qwen3-30B-A3B's released config
    ("llama2-7B", False),       # no file: Meta's released config
    ("llama3.1-405B", False),   # no file
    ("nemotron4-340B", False),  # no file: Nemotron-4 340B report, untied input and output embeddings
    ("mpt-7b", True),           # no file: llm-foundry's MPT reuses wte for the logits
    ("opt-175B", True),         # no file
    ("gpt3-20B", True),         # no file: Megatron GPT
])
def test_tie_of_each_model(name, tied):
    assert V.tied_embeddings_of(name) is tied


def test_validation_cases_carry_the_tie_and_count_both_matrices():
    loaded = V.load_all()
    by_model = {}
    for c in loaded.cases:
        by_model.setdefault(c.scenario.model.name, c)
    assert by_model["llama3-8B"].scenario.model.tied_embeddings is False
    assert by_model["mpt-7b"].scenario.model.tied_embeddings is True
    # an untied model at PP 1 holds its input embedding and its output layer: 2 x vocab x hidden / tp
    c = by_model["llama3-8B"]
    m = build_params(c.scenario).model
    tp = float(c.design["tp"])
    untied, _ = params_per_gpu(tp, 1.0, 1.0, m, float(m.layers))
    tied, _ = params_per_gpu(tp, 1.0, 1.0, m._replace(tied=1.0), float(m.layers))
    assert float(untied - tied) == pytest.approx(128256 * 4096 / tp, rel=1e-6)
