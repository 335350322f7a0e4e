"""Engine adapters: corral, llguidance and XGrammar behind one small interface.

Each adapter is built for one tokenizer (the constructor does the engine's tokenizer-side
preprocessing, which the runner times as *setup*) and offers:

* :meth:`Engine.compile` ``(lark_text, workload) -> factory``: compile a grammar; calling
  the returned factory makes a fresh matcher at the start state.
* :meth:`Engine.new_bitmask`, :meth:`Engine.fill`, :meth:`Engine.consume`,
  :meth:`Engine.is_accepting`: one packed ``int32 [1, ceil(V/32)]`` bitmask (bit set =
  allowed), fill it with the next-token mask, advance by one token (``False`` when the
  engine rejects it), and whether the tokens so far form a complete output.
* :meth:`Engine.bind_fill`: the fill as a zero-argument callable bound straight to the
  engine's own call, so that the runner's timer measures that call and not the adapter.

The engine packages are imported lazily (:meth:`Engine.import_modules`), so an engine that
is not installed can be skipped and a cold process can time its import.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from workloads import Workload

MatcherFactory = Callable[[], Any]

#: A small grammar, different from every workload's, compiled once per engine before any
#: timing so that the engine's code is loaded (and, for corral, Numba-compiled or loaded
#: from Numba's on-disk cache): the "warm process" of the compile-time measurements.
WARMUP_GRAMMAR = r"""
start: item ("," item)*
item: NAME "=" value
?value: NUMBER | ESCAPED_STRING | "[" [value ("," value)*] "]"
NAME: /[a-z_][a-z0-9_]*/
%import common.NUMBER
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
"""
WARMUP_TEXT = 'a = 1, b_2 = "x", c = [1, 2.5, "y"]'


class NotApplicableError(Exception):
    """The engine has no faithful way to run this workload (reported as ``n/a``)."""


class GrammarCompileError(Exception):
    """The engine refused the grammar."""


class Engine(ABC):
    """One constrained-decoding engine, set up for one tokenizer.

    Args:
        tokenizer: a Hugging Face fast tokenizer.
        vocab_size: the width of the bitmask (number of token ids), shared by all engines.
        eos_id: the token id that ends generation, allowed exactly when the output is complete.
    """

    name: ClassVar[str]
    #: Python modules the adapter needs (their absence skips the engine).
    modules: ClassVar[tuple[str, ...]]
    #: Distribution names whose versions go into the report.
    packages: ClassVar[tuple[str, ...]]
    #: Notes on what the compile and mask timings of this engine include.
    notes: ClassVar[str] = ""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_id: int) -> None:
        self.vocab_size = vocab_size
        self.eos_id = eos_id

    # -- availability -------------------------------------------------------------------
    @classmethod
    def missing_modules(cls) -> list[str]:
        """The modules of :attr:`modules` that are not installed."""
        return [m for m in cls.modules if importlib.util.find_spec(m.split(".")[0]) is None]

    @classmethod
    def import_modules(cls) -> None:
        """Import the engine's modules (the cold-process runner times this)."""
        for m in cls.modules:
            importlib.import_module(m)

    # -- interface ----------------------------------------------------------------------
    def grammar_used(self, workload: Workload) -> str:
        """What grammar this engine runs for ``workload`` (for the report)."""
        port = ", ported (see notes)" if self.name in workload.dialect_texts else ""
        return f"Lark {workload.grammar_file}{port}"

    @abstractmethod
    def compile(self, lark_text: str, workload: str) -> MatcherFactory:
        """Compile ``lark_text``; return a factory of fresh matchers.

        Raises:
            GrammarCompileError: the engine refused the grammar.
            NotApplicableError: the engine cannot run this workload faithfully.
        """

    @abstractmethod
    def new_bitmask(self) -> Any:
        """A fresh ``int32 [1, ceil(V/32)]`` bitmask in the engine's preferred container."""

    def bitmask_words(self, bitmask: Any) -> np.ndarray:
        """Row 0 of ``bitmask`` as a ``uint32`` NumPy view (shares memory; for checks)."""
        return np.asarray(bitmask)[0].view(np.uint32)

    @abstractmethod
    def fill(self, matcher: Any, bitmask: Any) -> None:
        """Write the allowed next tokens of ``matcher`` into row 0 of ``bitmask``."""

    def bind_fill(self, matcher: Any, bitmask: Any) -> Callable[[], object]:
        """A zero-argument callable doing exactly :meth:`fill` (override to skip the adapter)."""
        return functools.partial(self.fill, matcher, bitmask)

    @abstractmethod
    def consume(self, matcher: Any, token: int) -> bool:
        """Advance ``matcher`` by ``token``; ``False`` if the engine rejects it."""

    @abstractmethod
    def is_accepting(self, matcher: Any) -> bool:
        """Whether the tokens consumed so far form a complete output."""

    def warmup(self, tokenizer: Any) -> None:
        """Compile :data:`WARMUP_GRAMMAR` and run a short text through it (untimed)."""
        factory = self.compile(WARMUP_GRAMMAR, "warmup")
        m = factory()
        bm = self.new_bitmask()
        for tok in tokenizer.encode(WARMUP_TEXT, add_special_tokens=False):
            self.fill(m, bm)
            if not self.consume(m, int(tok)):
                raise RuntimeError(f"{self.name}: the warm-up text was rejected")
        self.fill(m, bm)
        if not self.is_accepting(m):
            raise RuntimeError(f"{self.name}: the warm-up text was not accepted")


class CorralEngine(Engine):
    """corral: ``corral.compile(text, vocab, cache=False)``, ``Matcher.fill_bitmask``."""

    name = "corral"
    modules = ("corral", "corral.automata")
    packages = ("corral", "numba", "numpy")
    notes = (
        "compile = corral.compile(text, vocab, cache=False): Lark parsing, automata and "
        "(for grammars with <= 256 lexer states) every lexer state's token cache; larger "
        "grammars build token caches on first use, inside mask calls; masks are stored by "
        "parse state (the top chart set's structural hash, automata/mask_cache.py) in the "
        "compiled grammar, so documents replayed later through the same grammar find the "
        "masks of states that earlier ones reached"
    )

    def __init__(self, tokenizer: Any, vocab_size: int, eos_id: int) -> None:
        super().__init__(tokenizer, vocab_size, eos_id)
        import corral

        self._corral = corral
        self.vocab = corral.Vocabulary.from_hf(
            tokenizer, vocab_size=vocab_size, eos_token_ids=[eos_id]
        )

    #: whether compiled grammars keep their mask cache (``automata/mask_cache.py``)
    mask_cache: ClassVar[bool] = True

    def compile(self, lark_text: str, workload: str) -> MatcherFactory:
        try:
            compiled = self._corral.compile(lark_text, self.vocab, cache=False)
        except self._corral.CorralError as e:
            raise GrammarCompileError(str(e)) from e
        if not self.mask_cache:
            compiled.mask_cache.max_bytes = 0
        return compiled.matcher

    def new_bitmask(self) -> Any:
        return self._corral.allocate_bitmask(1, self.vocab.size)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        matcher.fill_bitmask(bitmask, 0)

    def bind_fill(self, matcher: Any, bitmask: Any) -> Callable[[], object]:
        return functools.partial(matcher.fill_bitmask, bitmask, 0)

    def consume(self, matcher: Any, token: int) -> bool:
        return bool(matcher.try_consume(token))

    def is_accepting(self, matcher: Any) -> bool:
        return bool(matcher.is_accepting())


class CorralNoMaskCacheEngine(CorralEngine):
    """corral with its mask cache off: every mask computed by the kernel."""

    name = "corral-nocache"
    notes = "corral with compiled.mask_cache.max_bytes = 0: every mask is walked"
    mask_cache = False


class LLGuidanceEngine(Engine):
    """llguidance: ``LLMatcher(tokenizer, grammar_from("lark", text))``."""

    name = "llguidance"
    modules = ("llguidance", "llguidance.hf", "llguidance.numpy")
    packages = ("llguidance",)
    notes = (
        "compile = grammar_from('lark', text) + LLMatcher(...) construction; llguidance "
        "builds lexer states lazily, so part of the work happens in the first masks "
        "(see first_mask_us); each document runs on deep_copy() of the compiled matcher"
    )

    def __init__(self, tokenizer: Any, vocab_size: int, eos_id: int) -> None:
        super().__init__(tokenizer, vocab_size, eos_id)
        import llguidance
        import llguidance.hf
        import llguidance.numpy

        self._llg = llguidance
        self._fill = llguidance.numpy.fill_next_token_bitmask
        self.tokenizer = llguidance.hf.from_tokenizer(
            tokenizer, n_vocab=vocab_size, eos_token=eos_id
        )

    def compile(self, lark_text: str, workload: str) -> MatcherFactory:
        grammar = self._llg.grammar_from("lark", lark_text)
        matcher = self._llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise GrammarCompileError(matcher.get_error())
        return matcher.deep_copy

    def new_bitmask(self) -> Any:
        import llguidance.numpy

        return llguidance.numpy.allocate_token_bitmask(1, self.tokenizer.vocab_size)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        self._fill(matcher, bitmask, 0)

    def bind_fill(self, matcher: Any, bitmask: Any) -> Callable[[], object]:
        return functools.partial(self._fill, matcher, bitmask, 0)

    def consume(self, matcher: Any, token: int) -> bool:
        return bool(matcher.consume_token(token)) and not matcher.is_error()

    def is_accepting(self, matcher: Any) -> bool:
        return bool(matcher.is_accepting())


class XGrammarEngine(Engine):
    """XGrammar: ``GrammarCompiler.compile_lark(text)`` (XGrammar >= 0.2 reads Lark)."""

    name = "xgrammar"
    modules = ("xgrammar",)
    packages = ("xgrammar", "torch")
    notes = (
        "compile = GrammarCompiler(max_threads=1, cache_enabled=False).compile_lark(text), "
        "which includes XGrammar's adaptive token-mask cache; masks fill a torch int32 tensor"
    )

    def __init__(self, tokenizer: Any, vocab_size: int, eos_id: int) -> None:
        super().__init__(tokenizer, vocab_size, eos_id)
        import xgrammar as xgr

        self._xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=[eos_id]
        )
        # No cache (every compile is timed from scratch) and one thread (single-threaded run).
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)

    def _compile(self, lark_text: str, workload: str) -> Any:
        return self.compiler.compile_lark(lark_text)

    def compile(self, lark_text: str, workload: str) -> MatcherFactory:
        try:
            compiled = self._compile(lark_text, workload)
        except (RuntimeError, ValueError) as e:
            raise GrammarCompileError(str(e)) from e
        return functools.partial(self._xgr.GrammarMatcher, compiled)

    def new_bitmask(self) -> Any:
        return self._xgr.allocate_token_bitmask(1, self.info.vocab_size)

    def bitmask_words(self, bitmask: Any) -> np.ndarray:
        return bitmask.numpy()[0].view(np.uint32)

    def fill(self, matcher: Any, bitmask: Any) -> None:
        matcher.fill_next_token_bitmask(bitmask, 0)

    def bind_fill(self, matcher: Any, bitmask: Any) -> Callable[[], object]:
        return functools.partial(matcher.fill_next_token_bitmask, bitmask, 0)

    def consume(self, matcher: Any, token: int) -> bool:
        return bool(matcher.accept_token(token))

    def is_accepting(self, matcher: Any) -> bool:
        return bool(matcher.is_completed())


class XGrammarBuiltinJsonEngine(XGrammarEngine):
    """XGrammar with its built-in (strict) JSON grammar for ``json``; n/a elsewhere.

    Not in the default engine list: it shows XGrammar's hand-written JSON grammar next to
    the same Lark grammar the other engines run.
    """

    name = "xgrammar-builtin"
    notes = (
        "json only: GrammarCompiler.compile_builtin_json_grammar() (strict JSON, any "
        "value), not the Lark grammar"
    )

    def grammar_used(self, workload: Workload) -> str:
        if workload.name == "json":
            return "XGrammar builtin JSON grammar"
        return "n/a"

    def _compile(self, lark_text: str, workload: str) -> Any:
        if workload == "warmup":
            return self.compiler.compile_lark(lark_text)
        if workload != "json":
            raise NotApplicableError("the builtin grammar only covers JSON")
        return self.compiler.compile_builtin_json_grammar()


ENGINES: dict[str, type[Engine]] = {
    cls.name: cls
    for cls in (
        CorralEngine,
        CorralNoMaskCacheEngine,
        LLGuidanceEngine,
        XGrammarEngine,
        XGrammarBuiltinJsonEngine,
    )
}
DEFAULT_ENGINES: tuple[str, ...] = ("corral", "llguidance", "xgrammar")
