"""Decoding on top of the matcher, at the array level (no model framework here).

The decoding protocol: settings (``config``: :class:`GenerationConfig`, validated once),
the table of ``sampler=`` names (``registry``), the model interface (``lm``:
``CausalLM``, ``MaskedLM``), token samplers (``token``: masking, AWRS) run by the
KV-cache loop (``decode``), and sequence samplers (``sequence``: SMC, ASAp).

The algorithms: masking (``masking``), adaptive weighted rejection sampling (``awrs``),
sequential Monte Carlo (``smc``), grammar-aligned ASAp (``asap``), diffusion-LLM decoding
(``diffusion``, ``dingo``). Reference models with enumerable distributions, for testing
them exactly, are in :mod:`corral.testing`; the Hugging Face models behind ``lm``'s
interface in :mod:`corral.integrations.hf_lm`.

The bitmask helpers that samplers build on live in :mod:`corral.automata.bitmask`.
"""
