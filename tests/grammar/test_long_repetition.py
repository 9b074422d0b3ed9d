"""Long bounded repetitions: masks stay exact near the bound and cheap far from it.

A repetition such as `[a-z ]{120,300}` compiles to a chain of hundreds of states that all call
the same character rule. Their token-mask caches are shared by class (kernels/grammar/src/
cache_classes.h): states that no token can tell apart share one cache. Before, each of the 10,001
positions of `.{10001,}` built its own, 80-200 ms per token, and the fuzz regex below hung.
"""

import random
import subprocess
import sys
import textwrap

import pytest

from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary

LETTERS = set(b"abcdefghijklmnopqrstuvwxyz ")


def expected_mask(vocab: Vocabulary, written: int, low: int, high: int) -> set[int]:
    """Tokens allowed after `written` bytes of `[a-z ]{low,high}`: letters only, within the bound."""
    allowed = {t for t, data in enumerate(vocab.token_bytes)
               if t not in vocab.special_ids and data and set(data) <= LETTERS
               and written + len(data) <= high}
    if written >= low:
        allowed |= set(vocab.stop_ids)
    return allowed


@pytest.mark.parametrize("low,high", [(120, 300), (0, 90)])
def test_masks_of_a_bounded_repetition_are_exact_up_to_the_bound(compiler, low, high):
    vocab = compiler.vocab
    matcher = GrammarMatcher(compiler.compile_regex(f"[a-z ]{{{low},{high}}}"))
    rng = random.Random(low)
    written = 0
    while True:
        allowed = set(matcher.allowed_tokens())
        assert allowed == expected_mask(vocab, written, low, high), f"after {written} bytes"
        assert matcher.can_terminate() == (written >= low)
        content = sorted(allowed - set(vocab.stop_ids))
        if not content:
            break
        # Long tokens first, so the walk reaches the bound in a few dozen steps.
        choice = max(rng.sample(content, min(8, len(content))), key=lambda t: len(vocab.token_bytes[t]))
        assert matcher.accept_token(choice)
        written += len(vocab.token_bytes[choice])
    assert written == high


def test_ten_thousand_position_repetitions_walk_without_slowing():
    """The fuzz finding and its plain form, 200 tokens each, in a child bounded in memory and time."""
    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
        compiler = GrammarCompiler(Vocabulary.smollm2())
        vocab = compiler.vocab
        newline = vocab.token_bytes.index(b"\\n")
        x = vocab.token_bytes.index(b"x")
        for pattern, steps in [("(?:\\n){16,}(?:(?:[^]){100001,})+", [newline] * 100 + [x] * 100),
                               (".{10001,}", [x] * 200)]:
            m = GrammarMatcher(compiler.compile_regex(pattern))
            mask = m.new_bitmask()
            for i, t in enumerate(steps):
                m.fill_next_token_bitmask(mask)
                assert mask[t >> 5] >> (t & 31) & 1, (pattern, i)
                assert m.accept_token(t)
            assert not m.can_terminate()
        print("ok")
    """)
    # Before the cache classes this took minutes (each mask rebuilt thousands of caches).
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("max_length", [255, 1024, 32767])
def test_a_long_max_length_string_shares_its_mask_caches(compiler, max_length):
    """JSON string characters counted up to a maxLength: the positions more than a token's length
    from the bound stand in one cache class, so 150 characters of text build a handful of caches
    (before, a 16-character block's positions, each with its own cache per caller: about 45)."""
    vocab = compiler.vocab
    grammar = compiler.compile_json_schema({"type": "string", "maxLength": max_length})
    matcher = GrammarMatcher(grammar)
    mask = matcher.new_bitmask()
    word = vocab.token_bytes.index(b" word")
    for i in range(1 + 30):
        matcher.fill_next_token_bitmask(mask)
        t = vocab.token_bytes.index(b'"') if i == 0 else word
        assert mask[t >> 5] >> (t & 31) & 1
        assert matcher.accept_token(t)
    assert grammar.stats()["mask_caches"] <= 4


def test_repetitions_of_nothing_and_of_a_nullable_outlined_item_are_cheap():
    """Fuzz findings, in a child bounded in time: the core built 2^31 - 1 copies of an empty item one
    loop turn each; (\\p{L}|a*){16,100001} chained empty calls of its item rule at every position;
    with fifty more alternatives (seed 26) the first mask opened all 100,001 copies of the nullable
    item (11 s, then refused at the parser's limit): a nullable item now repeats without its empty
    text, from 0 (ir.folded_repeat)."""
    code = textwrap.dedent("""
        from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
        from trellis.grammar import ir
        compiler = GrammarCompiler(Vocabulary.smollm2())
        nothing = ir.Region(ir.Repeat(ir.EMPTY, ir.MAX_COUNT, None))
        empty = GrammarMatcher(compiler.compile_ir(ir.Grammar({"root": nothing}, "root")))
        assert empty.can_terminate() and not empty.accept_string("a")
        # Its size was estimated at 2^31 - 1 copies (refused as too large) while one is built.
        bounded = ir.Seq([ir.Bytes(b"a"), ir.Repeat(ir.EMPTY, 5, ir.MAX_COUNT)])
        m = GrammarMatcher(compiler.compile_ir(ir.Grammar({"root": bounded}, "root")))
        assert not m.can_terminate() and m.accept_string("a") and m.can_terminate()
        for pattern in ("(?:\\\\p{L}|(?:a)*){16,100001}",
                        "(?:\\\\p{L}|(?:a)" + "\\\\p{L}|(?:a)*" * 50 + "){16,100001}"):
            m = GrammarMatcher(compiler.compile_regex(pattern))
            mask = m.new_bitmask()
            assert m.can_terminate()  # sixteen empty copies
            for _ in range(20):
                m.fill_next_token_bitmask(mask)
                assert m.accept_string("ab")
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_mask_past_the_walk_work_limit_is_refused():
    """Fuzz seed 29's other hang: a raw-IR count {7,65536} of an item that is empty where a check
    holds. Every count is reached without a byte, so each configuration of a cache's walk held up
    to 65,536 frames: seconds per mask, no limit. The walk now stops at MaskWalk::kMaxWork frames
    looked at, and the mask is refused with GrammarLimitError naming it; the refusal is kept (the
    next mask refuses at once), the matcher goes on accepting, and a count of 1,000 still gives
    masks (about 14,000 frames a copy there)."""
    code = textwrap.dedent("""
        from trellis.errors import GrammarLimitError
        from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
        from trellis.grammar import ir
        compiler = GrammarCompiler(Vocabulary.smollm2())
        def count(hi):
            item = ir.Alt((ir.Check(ir.DISTINCT_KEY), ir.ByteSet(((0x26, 0xFE),))))
            return compiler.compile_ir(ir.Grammar({"root": ir.Repeat(item, 7, hi)}, "root"))
        m = GrammarMatcher(count(65536))
        mask = m.new_bitmask()
        for _ in range(2):
            try:
                m.fill_next_token_bitmask(mask)
                raise AssertionError("no limit")
            except GrammarLimitError as e:
                assert "33,554,432" in str(e), e
        assert m.accept_string("ab") and m.history_length == 1
        try:
            count(65536).warm()  # building every cache up front meets the same limit
            raise AssertionError("no limit")
        except GrammarLimitError as e:
            assert "33,554,432" in str(e), e
        m = GrammarMatcher(count(1000))
        m.fill_next_token_bitmask(mask)
        assert any(mask) and m.accept_string("ab")
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
