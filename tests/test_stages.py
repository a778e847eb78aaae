"""Pipeline stage split (cost/stages.py): hand-derived slowest stages and the feasibility bound it allows."""
import pytest

from sax_jax.cost.stages import slowest_stage

from conftest import f32 as F


@pytest.mark.parametrize("layers,pp,vpp,layer_s,logits_s,expected", [
    # Llama 3 405B, PP 16 x VP 8: 126 layers + embedding + loss = 128 units, one per chunk: 8 layers on a middle
    # stage and 7 + the output layer on the last; a middle stage is the slowest when logits < one layer
    (126, 16, 8, 1.0, 0.5, (8.0, 0.0)),
    # ... and the last one when the output layer costs more than a layer (huge vocabulary): 7 layers + logits
    (126, 16, 8, 1.0, 1.5, (7.0, 1.0)),
    # Llama 3 70B, PP 8 x VP 5: 80 / 40 = 2 per chunk; counting the 2 extra units would make it 3: plain split,
    # the last stage has 10 layers + logits
    (80, 8, 5, 1.0, 0.5, (10.0, 1.0)),
    # one stage holds everything
    (32, 1, 1, 1.0, 0.5, (32.0, 1.0)),
    # 96 layers, PP 8: plain 12 + logits (12.5) vs counted ceil(98/8) = 13 layers: plain wins
    (96, 8, 1, 1.0, 0.5, (12.0, 1.0)),
    # 94 layers, PP 8: plain ceil(94/8) = 12 + logits = 12.5; counted ceil(96/8) = 12 layers, no logits: 12
    (94, 8, 1, 1.0, 0.5, (12.0, 0.0)),
])
def test_slowest_stage_golden(layers, pp, vpp, layer_s, logits_s, expected):
    n, with_logits = slowest_stage(F(layers), F(pp), F(vpp), F(layer_s), F(logits_s))
    assert (float(n), float(with_logits)) == expected


def test_pipeline_units_bound_feasibility():
    """pp x vpp may reach layers + 2 (embedding and loss as units) with pp > 1, not beyond."""
    import sax_jax as sx
    from sax_jax.cost.feasibility import VIOLATIONS
    from sax_jax.evaluate import evaluate_one
    sc = sx.load_scenario("default")  # Llama 3 405B: 126 layers
    bit = 1 << [name for name, _ in VIOLATIONS].index("LAYERS_PP")
    base = sc.space.to_dict(sc.baseline_design())
    for pp, vpp, ok in ((16, 8, True), (2, 64, True), (1, 127, False)):
        d = sc.space.design(dict(base, pp=pp, vpp=vpp, schedule="interleaved" if vpp > 1 else "1f1b"))
        assert (not evaluate_one(sc, d)["violation"] & bit) == ok, (pp, vpp)
