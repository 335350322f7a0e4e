"""Decoding maths on logits tensors: masking (``masking``), adaptive weighted rejection
sampling (``awrs``), sequential Monte Carlo (``smc``), grammar-aligned ASAp (``asap``),
diffusion-LLM decoding (``diffusion``, ``dingo``), and small enumerable models for exact
tests of all of them (``synthetic``).

The bitmask helpers that samplers build on live in :mod:`corral.automata.bitmask`.
"""
