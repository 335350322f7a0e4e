"""Decoding maths on logits tensors: masking, and (planned) distribution-faithful samplers.

The bitmask helpers that samplers build on live in :mod:`corral.automata.bitmask`.
"""
