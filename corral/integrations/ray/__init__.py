"""Extraction on a Ray cluster: documents read as a Ray Dataset, records written by the
driver, models run by actors on the cluster's nodes.

* :mod:`.source`: the input file (JSONL or Parquet, on any filesystem Ray reads) as a Ray
  Dataset of numbered lines, so that every output row keeps its input line;
* :mod:`.worker`: the actor that extracts a batch of lines (corral's transformers path:
  the model, its vocabulary and the compiled schema built once per actor);
* :mod:`.run`: the driver: starts or joins the cluster, checks the schema before any
  worker starts, streams the rows back in input order and writes them as
  ``corral extract`` does (same format, same per-record errors, same resume).

``ray`` is imported only when these modules are used (``pip install 'corral[ray]'``).
See docs/ray.md.
"""
