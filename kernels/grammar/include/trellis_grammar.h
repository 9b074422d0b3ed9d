/* Trellis grammar core: the one C ABI shared by the native library and the wasm module.
 *
 * Objects are opaque handles. Functions that can fail return NULL or a negative value and
 * leave a message in tg_last_error() and a code in tg_last_error_code(). Nothing aborts
 * on bad input: the IR and every argument are validated. No exception crosses the ABI: an
 * allocation failure is reported as TG_ERR_LIMIT (native library; the wasm module is built
 * without exceptions and traps instead).
 *
 * Threads (native library): the last error is kept per thread. A vocabulary and a compiled
 * grammar may be used from many threads at once (compiling, creating matchers, filling masks:
 * a grammar's token-mask caches are built under a lock and read without one). A matcher is
 * not: use each from one thread at a time. The wasm module is single-threaded.
 */
#ifndef TRELLIS_GRAMMAR_H
#define TRELLIS_GRAMMAR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_API __attribute__((visibility("default")))

enum tg_error_code {
  TG_OK = 0,
  TG_ERR_ARGUMENT = 1,   /* a bad argument (null handle, id out of range, short buffer) */
  TG_ERR_IR = 2,         /* malformed IR words */
  TG_ERR_GRAMMAR = 3,    /* well-formed IR that is not a usable grammar (left recursion, empty language) */
  TG_ERR_LIMIT = 4,      /* a size limit was exceeded, or memory ran out */
  TG_ERR_INTERNAL = 5,   /* an unexpected failure inside the core (a bug) */
  TG_ERR_DECLINED = 6    /* the native JSON Schema converter does not cover this schema: the caller converts it */
};

/* tg_grammar_compile_json_schema's options (py/trellis/grammar/json_schema's, the dialect decided). */
enum tg_schema_flag {
  TG_SCHEMA_ANY_WHITESPACE = 1,
  TG_SCHEMA_STRICT = 2,
  TG_SCHEMA_DRAFT7 = 4,                    /* draft-07 semantics (and draft-06, draft-04) */
  TG_SCHEMA_INTEGERS_WITHOUT_FRACTION = 8, /* draft-04: 1.0 is not an integer */
  TG_SCHEMA_FORMAT_ASSERTION = 16,         /* `format` asserts (else an annotation) */
  TG_SCHEMA_CANONICAL_INTEGERS = 32        /* integers written without ".0" */
};

/* tg_grammar_stat's statistics. */
enum tg_grammar_stat_id {
  TG_STAT_RULES = 0,            /* rules with automata */
  TG_STAT_STATES = 1,           /* DFA states */
  TG_STAT_MASK_CACHES = 2,      /* token-mask caches computed so far */
  TG_STAT_MASK_CACHE_BYTES = 3, /* their size in bytes */
  TG_STAT_EMPTY = 4             /* 1 when the language is empty (no string matches: every token is refused) */
};

typedef struct tg_vocab tg_vocab;
typedef struct tg_grammar tg_grammar;
typedef struct tg_matcher tg_matcher;

TG_API const char* tg_last_error(void);
TG_API int32_t tg_last_error_code(void);

/* Scratch memory for callers that cannot share the host's heap (wasm). */
TG_API void* tg_alloc(int32_t size);
TG_API void tg_free(void* ptr);

/* Token i (i < n_tokens) is data[offsets[i] .. offsets[i+1]); ids in [n_tokens, vocab_size)
 * are padding. Special ids never appear in grammar text; stop ids are allowed only where the
 * grammar can end. */
TG_API tg_vocab* tg_vocab_new(int32_t vocab_size, const uint8_t* data, const int32_t* offsets,
                              int32_t n_tokens, const int32_t* special_ids, int32_t n_special,
                              const int32_t* stop_ids, int32_t n_stop);
TG_API void tg_vocab_free(tg_vocab* vocab);

/* Compile IR words (layout in py/trellis/grammar/ir.py). The grammar keeps a pointer to the
 * vocabulary, which must outlive it. */
TG_API tg_grammar* tg_grammar_compile(const tg_vocab* vocab, const int32_t* words, int32_t n_words);
/* A JSON Schema given as JSON text, converted by the native port of the Python converter
 * (kernels/grammar/src/schema/: the same grammar, word for word) and compiled. NULL with
 * TG_ERR_DECLINED where the port does not cover the schema (nor anything the Python converter
 * refuses): the caller then converts it in Python; NULL with another code is the compile's error.
 * unicode_version: the caller's Unicode database (major * 10000 + minor * 100 + micro), which
 * regex property escapes follow; under another version than the core's tables they decline. */
TG_API tg_grammar* tg_grammar_compile_json_schema(const tg_vocab* vocab, const char* text, int32_t n_text,
                                                  int32_t flags, int32_t max_whitespace, int32_t unicode_version);
/* What the dialect is decided from, read without handing the whole document over: the JSON text
 * of the document's top-level "$schema" and "$id" members as an object ({} when it has neither),
 * the document itself when it is a boolean, or null when it is no object. Parsed as json.loads
 * reads it, at most max_depth containers deep. Returns that text's length (written to `out` when
 * it fits in `cap` bytes; else ask again with a larger buffer), or -1 where the text is not such
 * JSON (the caller then reads the document itself). */
TG_API int32_t tg_json_schema_top(const char* text, int32_t n_text, int32_t max_depth, char* out, int32_t cap);
TG_API void tg_grammar_free(tg_grammar* grammar);
/* Rule index named by the last TG_ERR_GRAMMAR error, or -1. */
TG_API int32_t tg_last_error_rule(void);
/* One of enum tg_grammar_stat_id; -1 for a null grammar or an unknown id. */
TG_API int64_t tg_grammar_stat(const tg_grammar* grammar, int32_t which);

/* Builds the token-mask caches of up to max_states states that are still cold (all when
 * max_states < 0), so that later masks are lookups; returns how many were built. Engines call
 * it while the GPU runs the prefill. */
TG_API int32_t tg_grammar_warm(tg_grammar* grammar, int32_t max_states);

/* A matcher references its grammar, which must outlive it. Matchers of one grammar share its
 * token-mask cache, and may run in different threads at once; a matcher itself belongs to one
 * thread at a time. After a TG_ERR_LIMIT for lack of memory in a call that changes it, a matcher
 * refuses every call until tg_matcher_reset succeeds. */
TG_API tg_matcher* tg_matcher_new(tg_grammar* grammar);
TG_API void tg_matcher_free(tg_matcher* matcher);
/* Writes ceil(vocab_size / 32) words: bit i % 32 of word i / 32 set = token i allowed. */
TG_API int32_t tg_matcher_fill_mask(tg_matcher* matcher, uint32_t* words, int32_t n_words);
/* 1 accepted, 0 refused (state unchanged), negative on error. */
TG_API int32_t tg_matcher_accept_token(tg_matcher* matcher, int32_t token_id);
TG_API int32_t tg_matcher_accept_bytes(tg_matcher* matcher, const uint8_t* data, int32_t n);
/* Undo the last n accepted tokens or strings; 0 on success. */
TG_API int32_t tg_matcher_rollback(tg_matcher* matcher, int32_t n);
TG_API int32_t tg_matcher_history_length(const tg_matcher* matcher);
TG_API int32_t tg_matcher_is_terminated(const tg_matcher* matcher);
TG_API int32_t tg_matcher_can_terminate(const tg_matcher* matcher);
/* 0, or negative on error (out of memory). */
TG_API int32_t tg_matcher_reset(tg_matcher* matcher);
/* Bytes that are forced next (the only possible continuation), at most cap; returns the count. */
TG_API int32_t tg_matcher_jump_forward(tg_matcher* matcher, uint8_t* out, int32_t cap);
/* A shortest byte string after which the matcher can terminate (empty when it already can):
 * returns its length n and writes it to out when n <= cap (otherwise nothing: call again with
 * cap >= n). TG_NO_COMPLETION when there is none (the matcher is terminated); TG_ERR_LIMIT
 * when it is over 16 MiB. */
#define TG_NO_COMPLETION (-100)
TG_API int32_t tg_matcher_shortest_completion(tg_matcher* matcher, uint8_t* out, int32_t cap);

#ifdef __cplusplus
}
#endif
#endif
