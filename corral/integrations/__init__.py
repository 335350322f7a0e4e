"""Adapters to the outside world: model loading, Hugging Face transformers, pipelines.

Heavy dependencies (torch, transformers) are imported inside functions, never at import.
"""
