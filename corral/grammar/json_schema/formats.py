"""JSON Schema ``format`` values as exact regular expressions.

Each regex is in Python ``re`` syntax and describes the *decoded* string value with
full-match semantics (no anchors). Only ASCII classes such as ``[0-9]`` are used, never
``\\d`` or ``\\w``, which would also match other Unicode digits and letters. The only
lookarounds are one-character ones, which corral's regex front end supports.

The regexes are **sound**: every string a regex accepts is valid under the format's RFC
*and* accepted by ``jsonschema``'s format checker (``Draft202012Validator.FORMAT_CHECKER``
with the ``format-nongpl`` extras). Where one of the two is stricter, the regex follows
the stricter one:

``date``, ``time``, ``date-time`` (RFC 3339 section 5.6)
    Month lengths and the Gregorian leap-year rule are encoded, so February 29 is accepted
    only in leap years. Years are ``0001``-``9999``: the checker refuses year ``0000``.
    The leap second ``60`` is never accepted: the checker refuses every second ``60``.
    ``T``/``t`` and ``Z``/``z`` are both accepted, as RFC 3339 section 5.6 permits.
``duration``
    The ABNF of RFC 3339 appendix A, which JSON Schema 2020-12 adopts: integer values
    only, units in order, no skipped unit inside a run (``P1Y2D`` and ``PT1H2S`` are
    refused), and weeks (``P2W``) only alone.
``email``
    RFC 5321 ``Mailbox`` (which is also a valid RFC 5322 ``addr-spec``): a dot-atom or a
    quoted-string local part, then a domain name, ``[IPv4]`` or ``[IPv6:...]``. The
    local part is at most 64 octets and the whole address at most 254 (RFC 5321 section
    4.5.3.1). A quoted local part has at most 62 characters between its quotes when it
    has no backslash, and at most 31 characters or escape pairs when it has one. The
    domain follows the ``hostname`` narrowing below with two free labels instead of
    three, which bounds it to 189 octets. IPv6 literals follow RFC 5321's stricter rule
    that ``::`` stands for at least two groups.
``hostname``
    RFC 1123 labels of letters, digits and hyphens: 1-63 octets each, not starting or ending
    with a hyphen, at most 253 octets in all, no trailing dot. Two narrowings:

    * Labels with ``--`` in their third and fourth positions are refused. RFC 5890 reserves
      these labels ("R-LDH"): ``xn--`` labels are valid only when they are correct IDNA
      A-labels, and the JSON Schema test suite treats them that way.
    * The exact 253-octet limit together with the 63-octet label limit needs about
      24,000 DFA states, because the automaton must count both at once. So the regex
      accepts the first three labels at up to 63 octets each, and limits everything
      after the third label to 61 octets, dots included. That is at most
      ``3 * 63 + 3 + 61 = 253`` octets (the exact minimal DFA has 23,809 states; this
      one has about 500). In this remainder no label contains ``--`` at all. Apart from
      the ``--`` rules, the regex accepts every hostname of at most three labels and
      every hostname of at most 63 octets. It refuses only names with four or more
      labels whose labels after the third take more than 61 octets together.

    All-numeric labels are accepted, the last one included, as the RFC 1123 grammar and
    the checker allow (so ``1.2.3.4`` is a hostname here). RFC 1123 section 2.1 only
    remarks that top-level labels are alphabetic in practice.
``ipv4``
    Dotted quad, each part 0-255 without leading zeros.
``ipv6``
    Every RFC 4291 section 2.2 text form: full, ``::``-compressed, and with an embedded
    dotted quad. Hex groups have 1-4 digits. The embedded dotted quad has no leading
    zeros, because Python's ``ipaddress`` refuses them. Zone IDs (``%eth0``) are refused.
``uuid``
    RFC 4122 text form: ``8-4-4-4-12`` hex digits in either case, with hyphens.
``uri``, ``uri-reference``
    RFC 3986 appendix A, which matches the checker (``rfc3986-validator``) except in two
    places. IPvFuture hosts must start with a lowercase ``v``, because the checker
    accepts no ``V``. IPv6 hosts use the ``ipv6`` regex, which refuses leading zeros in
    an embedded dotted quad.
``iri``, ``iri-reference``
    RFC 3987 as the checker (``rfc3987-syntax``) reads it. That grammar is narrower than
    the RFC in two ways, and the regexes follow it. ``ucschar`` and ``iprivate`` cover
    the Basic Multilingual Plane only. IPv6 hosts take only the forms with eight groups
    or with exactly one group compressed, so ``http://[2001:db8::1]`` is refused.

Not provided, because a regex cannot be exact for them: ``idn-hostname`` (IDNA 2008
contextual and bidi rules), ``idn-email`` (its domain is an ``idn-hostname``), and the
formats that are not regular languages or have no RFC grammar here (``regex``,
``json-pointer``, ``relative-json-pointer``, ``uri-template``).
"""

from __future__ import annotations

__all__ = ["FORMAT_REGEXES", "format_regex"]

# --- shared pieces ------------------------------------------------------------------------

_DIGIT = "[0-9]"
_HEX = "[0-9A-Fa-f]"
_ALNUM = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"

_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = f"{_HEX}{{1,4}}"


def _ipv6(max_pieces_with_gap: int, *, exact_gap: bool = False) -> str:
    """IPv6 text forms. A piece is one hex group, or two for a trailing dotted quad.

    ``max_pieces_with_gap``: the most explicit pieces allowed next to ``::``. This is 7 for
    RFC 4291 and RFC 3986, where ``::`` may stand for one group. It is 6 for RFC 5321,
    where ``::`` stands for at least two groups. ``exact_gap``: with ``::``, require exactly
    ``max_pieces_with_gap`` pieces. The IRI checker's grammar needs this.
    """
    forms = [f"(?:{_H16}:){{7}}{_H16}", f"(?:{_H16}:){{6}}{_IPV4}"]
    for right in range(max_pieces_with_gap + 1):
        # The tail after "::": `right` pieces, all hex groups or ending in a dotted quad.
        tails = ["" if right == 0 else f"(?:{_H16}:){{{right - 1}}}{_H16}"]
        if right >= 2:
            tails.append(f"(?:{_H16}:){{{right - 2}}}{_IPV4}")
        tail = tails[0] if len(tails) == 1 else f"(?:{'|'.join(tails)})"
        left_max = max_pieces_with_gap - right
        if exact_gap:
            head = "" if left_max == 0 else f"(?:{_H16}:){{{left_max - 1}}}{_H16}"
        else:
            head = "" if left_max == 0 else f"(?:(?:{_H16}:){{0,{left_max - 1}}}{_H16})?"
        forms.append(f"{head}::{tail}")
    return "(?:" + "|".join(forms) + ")"


def _simplify_repeats(rx: str) -> str:
    """Drop the no-op quantifiers ``{0}`` (with their item) and ``{1}`` that ``_ipv6`` writes."""
    rx = rx.replace(f"(?:{_H16}:){{0}}", "")
    return rx.replace(f"(?:{_H16}:){{1}}", f"{_H16}:")


_IPV6 = _simplify_repeats(_ipv6(7))
_IPV6_SMTP = _simplify_repeats(_ipv6(6))
_IPV6_IRI = _simplify_repeats(_ipv6(7, exact_gap=True))

# --- date and time (RFC 3339 section 5.6, narrowed to the checker) -----------------------

# Years 0001-9999 (the checker refuses 0000).
_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
# Gregorian leap years: divisible by 4 but not by 100, or divisible by 400 (not 0000).
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
# Seconds stop at 59: the checker refuses the leap second 60.
_PARTIAL_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_TIME = f"{_PARTIAL_TIME}{_OFFSET}"
_DATE_TIME = f"{_DATE}[Tt]{_TIME}"

# --- duration (RFC 3339 appendix A, as JSON Schema 2020-12 adopts it) --------------------

_N = f"{_DIGIT}+"
_DUR_TIME = f"T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)"
_DUR_DATE = f"(?:{_N}Y(?:{_N}M(?:{_N}D)?)?|{_N}M(?:{_N}D)?|{_N}D)(?:{_DUR_TIME})?"
_DURATION = f"P(?:{_DUR_DATE}|{_DUR_TIME}|{_N}W)"

# --- hostname (RFC 1123, narrowed: see the module docstring) ------------------------------

# One label of 1-63 octets, not starting or ending with "-", and without "--" in its
# third and fourth positions (RFC 5890 reserved LDH labels, e.g. "xn--").
_LABEL = (
    f"{_ALNUM}(?:{_LDH}?{_ALNUM}"
    f"|{_LDH}(?:{_ALNUM}{_LDH}{{0,59}}|-(?:{_ALNUM}{_LDH}{{0,58}})?){_ALNUM})?"
)


def _labels_tail(octets: int) -> str:
    """One or more dot-separated labels, at most ``octets`` (< 64) octets in all.

    Below 64 octets the label limit holds by itself, so only the total is counted. The
    one-character lookarounds keep ``.`` between alphanumerics and refuse ``--``.
    """
    item = f"(?:{_ALNUM}|(?<!-)-(?![.-])|(?<={_ALNUM})\\.(?={_ALNUM}))"
    return f"{_ALNUM}{item}{{0,{octets - 1}}}(?<={_ALNUM})"


def _hostname(free_labels: int, tail_octets: int) -> str:
    """Up to ``free_labels`` labels of up to 63 octets, then at most ``tail_octets`` more."""
    rx = rf"\.{_labels_tail(tail_octets)}"
    for _ in range(free_labels - 1):
        rx = rf"\.{_LABEL}(?:{rx})?"
    return f"{_LABEL}(?:{rx})?"


# 3 * 63 + 3 dots + 61 = 253 octets.
_HOSTNAME = _hostname(3, 61)
# 2 * 63 + 2 dots + 61 = 189 octets; with a 64-octet local part and "@": 254.
_MAIL_DOMAIN = _hostname(2, 61)

# --- email (RFC 5321 Mailbox, also an RFC 5322 addr-spec) ---------------------------------

_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
# Dot-atom of 1-64 octets: no leading, trailing or doubled dot.
_DOT_ATOM_LOCAL = rf"{_ATEXT}(?:{_ATEXT}|\.(?!\.)){{0,63}}(?<!\.)"
_QTEXT = r"[ !#-\[\]-~]"
_QUOTED_PAIR = r"\\[ -~]"
# Quoted local part of at most 64 octets including the quotes.
_QUOTED_LOCAL = f'"(?:{_QTEXT}{{1,62}}|(?:{_QTEXT}|{_QUOTED_PAIR}){{1,31}})"'
_EMAIL = (
    f"(?:{_DOT_ATOM_LOCAL}|{_QUOTED_LOCAL})"
    rf"@(?:{_MAIL_DOMAIN}|\[{_IPV4}\]|\[IPv6:{_IPV6_SMTP}\])"
)

# --- uuid ---------------------------------------------------------------------------------

_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

# --- URI and IRI (RFC 3986 appendix A, RFC 3987 section 2.2) -----------------------------

_UNRESERVED = r"A-Za-z0-9._~\-"  # the body of a class
_SUB_DELIMS = "!$&'()*+,;="
_PCT = f"%{_HEX}{{2}}"
_SCHEME = "[A-Za-z][A-Za-z0-9+.-]*"
# RFC 3987: the BMP part of ucschar and of iprivate (all that the IRI checker accepts).
_UCSCHAR = r"\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
_IPRIVATE = r"\ue000-\uf8ff"


def _uri(unreserved: str, ipv6: str, *, private: str = "", reference: bool) -> str:
    """RFC 3986 ``URI`` (or ``URI-reference``), or its RFC 3987 ``IRI`` analogue.

    ``unreserved``: the class body of (i)unreserved. ``private``: the class body of
    characters allowed in the query only (RFC 3987 ``iprivate``).
    """
    pchar = f"(?:[{unreserved}{_SUB_DELIMS}:@]|{_PCT})"
    pchar_nc = f"(?:[{unreserved}{_SUB_DELIMS}@]|{_PCT})"
    userinfo = f"(?:[{unreserved}{_SUB_DELIMS}:]|{_PCT})*"
    ip_future = f"v{_HEX}+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
    reg_name = f"(?:[{unreserved}{_SUB_DELIMS}]|{_PCT})*"
    # IPv4address is a subset of reg-name, so it needs no branch of its own.
    host = rf"(?:\[(?:{ipv6}|{ip_future})\]|{reg_name})"
    authority = f"(?:{userinfo}@)?{host}(?::[0-9]*)?"
    segments = f"(?:/{pchar}*)*"
    net_path = f"//{authority}{segments}"
    absolute_path = f"/(?:{pchar}+{segments})?"
    query = f"(?:{pchar}|[/?{private}])*"
    fragment = f"(?:{pchar}|[/?])*"
    suffix = rf"(?:\?{query})?(?:#{fragment})?"
    uri = f"{_SCHEME}:(?:{net_path}|{absolute_path}|{pchar}+{segments}|){suffix}"
    if not reference:
        return uri
    relative = f"(?:{net_path}|{absolute_path}|{pchar_nc}+{segments}|){suffix}"
    return f"(?:{uri}|{relative})"


_URI = _uri(_UNRESERVED, _IPV6, reference=False)
_URI_REFERENCE = _uri(_UNRESERVED, _IPV6, reference=True)
_IRI = _uri(_UNRESERVED + _UCSCHAR, _IPV6_IRI, private=_IPRIVATE, reference=False)
_IRI_REFERENCE = _uri(_UNRESERVED + _UCSCHAR, _IPV6_IRI, private=_IPRIVATE, reference=True)

# --- uri-template (RFC 6570, level 4), JSON pointers (RFC 6901, relative draft) -----------

_PCT = "%[0-9A-Fa-f]{2}"
# literals: any character but CTL, SP, " ' % < > \\ ^ ` { | }, or a %-escape (ucschar and
# iprivate as in RFC 3987)
_TEMPLATE_LITERAL = (
    "(?:[!#$&(-;=?-\\[\\]_a-z~\u00a0-\ud7ff\ue000-\ufdcf\ufdf0-\uffef"
    "\U00010000-\U000efffd]|" + _PCT + ")"
)
_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT})"
# (narrowed to the checker: no %-escape as the first character of a name, prefix
# lengths below 1000; the operators RFC 6570 reserves for future use are left out)
_VARSPEC = f"[A-Za-z0-9_](?:\\.?{_VARCHAR})*(?::[1-9][0-9]{{0,2}}|\\*)?"
_URI_TEMPLATE = f"(?:{_TEMPLATE_LITERAL}|\\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\\}})*"
_JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"
_RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"

# --- the table ----------------------------------------------------------------------------

FORMAT_REGEXES: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE_TIME,
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": _UUID,
    "uri": _URI,
    "uri-reference": _URI_REFERENCE,
    "iri": _IRI,
    "iri-reference": _IRI_REFERENCE,
    "uri-template": _URI_TEMPLATE,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": _RELATIVE_JSON_POINTER,
}
"""Format name → Python regex, matched against the whole decoded string value."""


def format_regex(name: str) -> str | None:
    """The regex for a format, or None when corral has none for it."""
    return FORMAT_REGEXES.get(name)
