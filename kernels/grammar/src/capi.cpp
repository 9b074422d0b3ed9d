// The C ABI: argument checks, handles and the last error. No exception crosses it (the
// core is built with -fno-exceptions).
#include <cstdlib>
#include <cstring>
#include <string>

#include "../include/trellis_grammar.h"
#include "grammar.h"
#include "matcher.h"
#include "vocab.h"

struct tg_vocab { tg::Vocab v; };
struct tg_grammar { tg::Grammar g; };
struct tg_matcher {
  explicit tg_matcher(tg::Grammar* g) : m(g) {}
  tg::Matcher m;
};

namespace {

tg::Status g_error;

int32_t fail(tg::Status s) {
  g_error = std::move(s);
  return -static_cast<int32_t>(g_error.code);
}
int32_t fail(const char* message) { return fail(tg::Status::error(tg::Code::argument, message)); }
void clear() { g_error = tg::Status{}; }

}  // namespace

extern "C" {

const char* tg_last_error(void) { return g_error.message.c_str(); }
int32_t tg_last_error_code(void) { return static_cast<int32_t>(g_error.code); }
int32_t tg_last_error_rule(void) { return g_error.rule; }

void* tg_alloc(int32_t size) { return size > 0 ? std::malloc(static_cast<size_t>(size)) : nullptr; }
void tg_free(void* ptr) { std::free(ptr); }

tg_vocab* tg_vocab_new(int32_t vocab_size, const uint8_t* data, const int32_t* offsets, int32_t n_tokens,
                       const int32_t* special_ids, int32_t n_special, const int32_t* stop_ids,
                       int32_t n_stop) {
  clear();
  auto* v = new tg_vocab;
  tg::Status s = tg::build_vocab(vocab_size, data, offsets, n_tokens, special_ids, n_special, stop_ids,
                                 n_stop, &v->v);
  if (!s.ok()) {
    delete v;
    fail(std::move(s));
    return nullptr;
  }
  return v;
}

void tg_vocab_free(tg_vocab* vocab) { delete vocab; }

tg_grammar* tg_grammar_compile(const tg_vocab* vocab, const int32_t* words, int32_t n_words) {
  clear();
  if (!vocab) {
    fail("null vocabulary");
    return nullptr;
  }
  auto* g = new tg_grammar;
  tg::Status s = tg::compile_grammar(vocab->v, words, n_words, &g->g);
  if (!s.ok()) {
    delete g;
    fail(std::move(s));
    return nullptr;
  }
  return g;
}

void tg_grammar_free(tg_grammar* grammar) { delete grammar; }

int64_t tg_grammar_stat(const tg_grammar* grammar, int32_t which) {
  if (!grammar) return -1;
  const tg::Grammar& g = grammar->g;
  switch (which) {
    case 0: {
      int64_t n = 0;
      for (int32_t s : g.automaton.start) n += s >= 0;
      return n;
    }
    case 1: return g.automaton.n_states();
    case 2: return g.caches_built;
    case 3: return g.cache_bytes;
    case 4: return g.automaton.empty;
    default: return -1;
  }
}

int32_t tg_grammar_warm(tg_grammar* grammar, int32_t max_states) {
  if (!grammar) return fail("null grammar");
  tg::Grammar& g = grammar->g;
  return g.warm(max_states);
}

tg_matcher* tg_matcher_new(tg_grammar* grammar) {
  clear();
  if (!grammar) {
    fail("null grammar");
    return nullptr;
  }
  return new tg_matcher(&grammar->g);
}

void tg_matcher_free(tg_matcher* matcher) { delete matcher; }

int32_t tg_matcher_fill_mask(tg_matcher* matcher, uint32_t* words, int32_t n_words) {
  if (!matcher || !words) return fail("null matcher or buffer");
  const int32_t need = matcher->m.vocab().words();
  if (n_words < need) return fail(("bitmask too short: need " + std::to_string(need) + " words").c_str());
  matcher->m.fill_mask(words);
  return 0;
}

int32_t tg_matcher_accept_token(tg_matcher* matcher, int32_t token_id) {
  if (!matcher) return fail("null matcher");
  if (token_id < 0 || token_id >= matcher->m.vocab().vocab_size)
    return fail(("token id " + std::to_string(token_id) + " out of range").c_str());
  return matcher->m.accept_token(token_id);
}

int32_t tg_matcher_accept_bytes(tg_matcher* matcher, const uint8_t* data, int32_t n) {
  if (!matcher || n < 0 || (n > 0 && !data)) return fail("null matcher or bad buffer");
  return matcher->m.accept_bytes(data, n);
}

int32_t tg_matcher_rollback(tg_matcher* matcher, int32_t n) {
  if (!matcher) return fail("null matcher");
  if (!matcher->m.rollback(n))
    return fail(("cannot roll back " + std::to_string(n) + " steps: history has " +
                 std::to_string(matcher->m.history_length()))
                    .c_str());
  return 0;
}

int32_t tg_matcher_history_length(const tg_matcher* matcher) {
  return matcher ? matcher->m.history_length() : fail("null matcher");
}
int32_t tg_matcher_is_terminated(const tg_matcher* matcher) {
  return matcher ? matcher->m.is_terminated() : fail("null matcher");
}
int32_t tg_matcher_can_terminate(const tg_matcher* matcher) {
  return matcher ? matcher->m.can_terminate() : fail("null matcher");
}
void tg_matcher_reset(tg_matcher* matcher) {
  if (matcher) matcher->m.reset();
}

int32_t tg_matcher_jump_forward(tg_matcher* matcher, uint8_t* out, int32_t cap) {
  if (!matcher || cap < 0 || (cap > 0 && !out)) return fail("null matcher or bad buffer");
  return matcher->m.jump_forward(out, cap);
}

int32_t tg_matcher_shortest_completion(tg_matcher* matcher, uint8_t* out, int32_t cap) {
  if (!matcher || cap < 0 || (cap > 0 && !out)) return fail("null matcher or bad buffer");
  std::vector<uint8_t> bytes;
  const int64_t n = matcher->m.shortest_completion(&bytes);
  if (n < 0) return TG_NO_COMPLETION;
  if (n > tg::Matcher::kMaxCompletion)
    return fail(tg::Status::error(tg::Code::limit, "the shortest completion is " + std::to_string(n) +
                                                       " bytes long, too long to spell out"));
  if (n > 0 && n <= cap) std::memcpy(out, bytes.data(), static_cast<size_t>(n));
  return static_cast<int32_t>(n);
}

}  // extern "C"
