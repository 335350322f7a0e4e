"""Per-type emitters of the JSON Schema translator: each turns the keywords of one type
family into grammar rules and terminals, through the translator it is given.

* ``number.py``: ``integer``/``number`` (bounds, ``multipleOf``);
* ``string.py``: strings (lengths, ``pattern``, ``format``) and ECMA-262 patterns;
* ``enum.py``: ``enum``/``const`` and constant values;
* ``array.py``: arrays (items, counts, ``contains``, ``uniqueItems``);
* ``object.py``: objects (properties, additional/pattern properties, names, counts,
  ``dependentRequired``, property order);
* ``combinators.py``: ``$ref`` with siblings, ``allOf``, ``anyOf``/``oneOf``.
"""
