"""``corral demo`` (or ``python -m corral.demo``): schema-constrained extraction with a
small real model.

For a few short texts, the model (Gemma-3-270M by default, installed from PyPI and
converted once to an fp32 copy in the user's cache directory) writes a JSON record under a
JSON Schema with :func:`corral.generate`, and the same model writes freely from the same
prompt (greedy in both cases). Both are printed, with whether each output validates
against the schema, and how much of the step time the constraint took.

Options: ``--model PATH`` (a local Hugging Face model folder), ``--max-new-tokens N``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

TEXTS = [
    "Maria Lopez, 34, moved from Seville to Berlin last spring and works as a nurse there.",
    "The parcel was signed for by Tom Becker (age 52) at our office in Dublin.",
    "Aiko Tanaka is 27 and lives in Osaka, where she teaches piano to children.",
    "Yesterday Dr. Emre Yilmaz of Izmir turned forty-one; he celebrated with his family.",
    "Our new intern, Lena, recently moved to Vienna.",
]

#: A person record. ``age`` and ``city`` may be ``null``: a schema that requires an integer
#: makes the model write one even when the text has none (it invents it). Allowing null,
#: and showing null in an example, lets the model say the value is missing.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "age": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 120}, {"type": "null"}]},
        "city": {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 40}, {"type": "null"}]},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}

PROMPT = """Extract the person from the text as JSON. Write null for what the text does not say.
Text: John Smith, 45, has lived in Paris for ten years.
JSON: {{"name": "John Smith", "age": 45, "city": "Paris"}}
Text: Our neighbour Sam Reid just started working at the bakery in Leeds.
JSON: {{"name": "Sam Reid", "age": null, "city": "Leeds"}}
Text: {text}
JSON:"""


def verdict(text: str) -> str:
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError:
        return "not JSON"
    try:
        jsonschema.validate(value, SCHEMA)
    except jsonschema.ValidationError as e:
        return f"JSON, invalid: {e.message}"
    return "valid"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corral demo", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="local Hugging Face model folder")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import corral
    from corral.integrations.generate import decode_steps, prompt_ids
    from corral.integrations.models import DEFAULT_MODEL, resolve_model
    from corral.integrations.vocabularies import eos_ids_of
    from corral.sampler.decode import GenerationStats

    t0 = time.perf_counter()
    model, tok = resolve_model(args.model or DEFAULT_MODEL)
    print(f"model: {model.config.model_type}, vocabulary {model.config.vocab_size} "
          f"(loaded in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
    print(f"schema: {json.dumps(SCHEMA)}\n")
    ok = 0
    for text in TEXTS:
        prompt = PROMPT.format(text=text)
        try:
            result = corral.generate(model, prompt, schema=SCHEMA, tokenizer=tok, details=True,
                                     max_new_tokens=args.max_new_tokens)  # fmt: skip
            constrained = json.dumps(result.value, ensure_ascii=False)
            st = result.stats
            info = (f"{st.new_tokens} tokens, {st.forced_tokens} forced; "
                    f"mask {st.mask_share:.1%} of step time")  # fmt: skip
            ok += 1
        except corral.IncompleteGenerationError as e:
            constrained, info = e.partial_text, "incomplete: token budget spent"
        free_stats = GenerationStats()
        free_ids: list[int] = []
        for new in decode_steps(model, prompt_ids(tok, prompt), None, tokenizer=tok,
                                eos_ids=eos_ids_of(model, tok), stats=free_stats,
                                max_new_tokens=args.max_new_tokens):  # fmt: skip
            free_ids.extend(new)
            if "\n" in tok.decode(free_ids).strip(" "):
                break
        free = tok.decode(free_ids).strip().split("\n")[0]
        print(f"Text: {text}")
        print(f"  corral : {constrained}   [{verdict(constrained)}; {info}]")
        print(f"  free   : {free}   [{verdict(free)}]\n")
    print(f"{ok}/{len(TEXTS)} constrained outputs are valid records.")
    return 0 if ok == len(TEXTS) else 1


if __name__ == "__main__":
    sys.exit(main())
