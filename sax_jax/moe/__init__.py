"""Host-side MoE expert placement, computed once per scenario: activation traces (``traces``), their converters
(``convert``) and synthetic generator (``synthetic``), placement policies (``placement``) and the tables the
jitted model indexes by (expert_placement, ep) (``tables``; read by cost/expert_placement.py)."""
