"""The parser's state stays polynomial on ambiguous grammars and recursive anyOf schemas.

Stacks that share their top are merged (kernels/grammar/src/parser.h): before, each token of
the ambiguous grammar below doubled time and memory until the process aborted. The walks run in
a child process so a blow-up fails the test instead of taking pytest down.
"""

import subprocess
import sys
import textwrap

AMBIGUOUS = 'root ::= x\\nx ::= y | z\\ny ::= "a" x "1"\\nz ::= "a" x "2" | ""'

CHILD = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    from trellis.grammar import GrammarCompiler, GrammarMatcher, Vocabulary
    compiler = GrammarCompiler(Vocabulary.smollm2())
    print("ok")
""")


def run_child(body: str) -> str:
    head, tail = CHILD.rsplit('print("ok")', 1)
    code = head + textwrap.dedent(body) + 'print("ok")' + tail
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_ambiguous_grammar_300_tokens_with_masks():
    run_child(f"""
        g = compiler.compile_grammar('{AMBIGUOUS}')
        m = GrammarMatcher(g)
        a = compiler.vocab.token_bytes.index(b"a")
        one = compiler.vocab.token_bytes.index(b"1")
        two = compiler.vocab.token_bytes.index(b"2")
        mask = m.new_bitmask()
        for i in range(300):
            m.fill_next_token_bitmask(mask)
            assert mask[a >> 5] >> (a & 31) & 1, i
            assert m.accept_token(a)
            assert not m.can_terminate()  # every "a" needs its closing digit
        # Close them all, each with either digit: exactly 300 digits end it.
        for i in range(300):
            m.fill_next_token_bitmask(mask)
            assert mask[one >> 5] >> (one & 31) & 1 and mask[two >> 5] >> (two & 31) & 1
            assert not m.can_terminate()
            assert m.accept_token(one if i % 3 else two)
        assert m.can_terminate()
        assert not m.accept_token(one)
        assert m.shortest_completion() == b""
    """)


def test_recursive_anyof_tree_1000_deep():
    run_child("""
        import json, jsonschema
        node = {"anyOf": [
            {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}},
             "kind": {"const": k}}, "required": ["children", "kind"], "additionalProperties": False}
            for k in ("a", "b")]}
        g = compiler.compile_json_schema(node)
        m = GrammarMatcher(g)
        mask = m.new_bitmask()
        depth = 1000
        for _ in range(depth):
            m.fill_next_token_bitmask(mask)
            assert m.accept_string('{"children": [')
        m.fill_next_token_bitmask(mask)
        assert m.accept_string(']')
        assert not m.accept_string(', "kind": "c"')
        rest = m.shortest_completion().decode()
        text = '{"children": [' * depth + ']' + rest
        sys.setrecursionlimit(20000)  # the oracles recurse per level
        doc = json.loads(text)
        jsonschema.validate(doc, node)
        assert m.accept_string(rest) and m.can_terminate()
    """)


def test_doubly_recursive_ambiguous_rule_300_letters_masks_exact():
    """A fuzz finding: a nullable rule that calls itself twice in one alternative, over a letter
    class. Hundreds of frames stay live (one per way the letters so far can nest), and most of
    the vocabulary is left to the real stack: the old core walked the trie once per frame, and
    its scratch state passed the parser's budget (GrammarLimitError) before 60 letters. The
    frames are walked together now, and tokens that are one string of byte classes share their
    steps (grammar.h: TokenWalker). Masks checked against accept_token over the vocabulary."""
    run_child('''
        g = compiler.compile_grammar('root ::= ([a-z] root root [a-z] | [a-z] root "!" [a-z])?')
        m = GrammarMatcher(g)
        mask = m.new_bitmask()
        text = ("structuredoutputinthebrowser" * 11)[:300]
        for i in range(0, len(text), 5):
            m.fill_next_token_bitmask(mask)
            if i in (0, 5, 150, 295):
                for t in range(compiler.vocab.vocab_size):
                    ok = m.accept_token(t)
                    if ok:
                        m.rollback(1)
                    assert bool(mask[t >> 5] >> (t & 31) & 1) == bool(ok), (i, t)
            assert m.accept_string(text[i:i + 5]), i
        assert m.can_terminate()  # 300 letters: an even number
        assert m.accept_string("a") and not m.can_terminate()  # letters alone: an even number
    ''')


def test_an_item_repeated_without_bound_keeps_the_live_frames_bounded():
    """A loop calls its item's rule anew at each position; when the caller waits in one state,
    those calls' joins are equal (parser.h: same_join) and their frames merge. Before, each
    call's frames lived on beside the others: accepting 10,000 four-byte characters of this
    regex (a fuzz finding) took 49 s, each byte slower than the one before (now 0.2 s). The
    child's time bound fails the test if it comes back."""
    run_child('''
        rx = "(?:(?:\\\\u{1F600}){100,}|(?:\\\\u{1F600}){100,}){100,}"
        g = compiler.compile_regex(rx)
        m = GrammarMatcher(g)
        text = "\\U0001F600" * 40_000
        for i in range(0, len(text), 1000):
            assert m.accept_string(text[i:i + 1000]), i
        assert m.can_terminate()
        assert not GrammarMatcher(g).accept_string("\\U0001F600" * 9_999 + "x")
    ''')


def test_a_parser_past_its_budget_is_a_limit_error_until_reset():
    """An ambiguous counted repetition (items of one or two characters) keeps every count of
    items alive: fed its 100,001-item completion, the parser's state grows with the square of
    the text. Before the budget (parser.h: FramePool::kMaxNodes) the process was killed for
    memory; now the call raises GrammarLimitError naming the limit, the matcher refuses further
    calls until reset, and the reset one works. A long valid text of an ordinary grammar stays
    well within the budget."""
    run_child('''
        import json
        from trellis.errors import GrammarLimitError
        m = GrammarMatcher(compiler.compile_regex(r"^(?:\\w|\\P{Lu}\\w){100001,}$"))
        text = m.shortest_completion()
        assert len(text) == 100_001
        try:
            m.accept_string(text)
            raise AssertionError("no limit")
        except GrammarLimitError as e:
            assert "16,777,216" in str(e), e
        try:
            m.accept_string("a")
            raise AssertionError("a matcher past its budget went on")
        except GrammarLimitError as e:
            assert "reset" in str(e), e
        m.reset()
        assert m.accept_string("ab" * 500) and not m.can_terminate()
        doc = json.dumps([{"id": i, "tags": ["a", {"x": [1, 2.5, None]}]} for i in range(20_000)])
        m = GrammarMatcher(compiler.compile_builtin_json())
        assert m.accept_string(doc) and m.can_terminate()
    ''')


def test_a_long_text_at_once_past_the_work_limit_is_refused():
    """Fuzz seed 24's hang: two unbounded repetitions of one byte in a row (a structural tag's
    sequence of two regexes), fed their 131,070-byte completion in one accept, keep every split
    point alive: about n^2/2 frame steps, over an hour. One accept now stops at the work limit
    (matcher.h: Matcher::kMaxStepWork) with GrammarLimitError naming it, refused, the matcher as
    it was: it goes on (a mask, then more text), and the same text fed in pieces is accepted."""
    run_child('''
        from trellis.errors import GrammarLimitError
        run = {"type": "regex", "pattern": "(?:\\\\\\\\|\\\\\\\\){65535,}"}
        m = GrammarMatcher(compiler.compile_structural_tag({"type": "sequence", "elements": [run, run]}))
        try:
            m.accept_string(b"\\\\" * 131_070)
            raise AssertionError("no limit")
        except GrammarLimitError as e:
            assert "268,435,456" in str(e), e
        m.fill_next_token_bitmask(m.new_bitmask())  # the refusal was that call's alone
        assert m.history_length == 0 and m.accept_string(b"\\\\" * 70_000) and not m.can_terminate()
        m = GrammarMatcher(compiler.compile_structural_tag({"type": "sequence", "elements": [run, run]}))
        for _ in range(10):
            assert m.accept_string(b"\\\\" * 2_000)
    ''')


def test_work_of_closures_counts_against_the_limit():
    """Fuzz seed 29's hang: nested counted repetitions, (?:(?:\\.){1000,65535}){1000,65535})*, fed
    their million-byte completion at once. Each byte's few frames closed over a growing number of
    split points, and the limit counted only the frames stepped: 20,000 bytes took 7 s and were
    accepted, the million about 30 s before the limit stopped them. The frames the closures look
    at count too: 20,000 bytes at once stop at the limit (after about 3 s), in pieces they pass."""
    run_child('''
        from trellis.errors import GrammarLimitError
        m = GrammarMatcher(compiler.compile_regex("(?:(?:(?:\\\\.){1000,65535}){1000,65535})*"))
        try:
            m.accept_string(b"." * 20_000)
            raise AssertionError("no limit")
        except GrammarLimitError as e:
            assert "268,435,456" in str(e), e
        assert m.history_length == 0
        for _ in range(4):
            assert m.accept_string(b"." * 1_000)
    ''')
