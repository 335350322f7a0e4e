"""Helpers shared by the tests: tokenizer assets, grammar corpora, word generators, oracles."""
