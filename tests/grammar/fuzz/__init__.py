"""A fuzz harness for the grammar engine (front-ends, IR, C++ core), kept in the repository.

    generators.py  hypothesis strategies: EBNF, regex, JSON Schema, raw IR, structural tags,
                   response_format dicts, and mutations of valid inputs (corpus.py)
    cases.py       one input (generator, kind, payload, options, walk seed): how to compile it,
                   its JSON form and its reproducer
    worker.py      the worker process: compiles a case, then walks its masks (walk.py)
    pool.py        persistent workers with a time and memory bound per input; a worker that dies
                   or overruns is recorded and replaced
    minimize.py    delta debugging for texts, tree shrinking for JSON values
    harness.py     drives generators into the pool for a time budget, classifies and
                   de-duplicates findings (crash, hang, memory, untyped, disagreement)

The property, per input: compiling ends in a compiled grammar or a TrellisError, within the time
bound; a compiled grammar's masks agree with accept_token, rollback, reset, accept_string,
can_terminate / is_terminated and shortest_completion (and, for JSON Schemas, a completed text
validates against the schema with the `jsonschema` package).

Entry points: tests/grammar/fuzz/test_short_run.py (the short run, in the suite and on the sanitized core) and benchmarks/fuzz_bench.py (long run).
Replay one case: python -m tests.grammar.fuzz.replay CASE_JSON
"""
