// The C ABI: argument checks, handles and the last error (per thread). No exception and no
// abort crosses it: the native library is built with exceptions, and every entry point turns
// one (an allocation failure, std::bad_alloc) into an error status (TG_ERR_LIMIT). The wasm
// module is built without exceptions: there the same source compiles to plain calls.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../include/trellis_grammar.h"
#include "grammar.h"
#include "matcher.h"
#include "schema/converter.h"
#include "schema/regex.h"
#include "vocab.h"

struct tg_vocab { tg::Vocab v; };
struct tg_grammar { tg::Grammar g; };
struct tg_matcher {
  explicit tg_matcher(tg::Grammar* g) : m(g) {}
  tg::Matcher m;
  // An exception stopped a call half-way: the matcher's state may be inconsistent, so every
  // call but reset and free is refused until a reset succeeds.
  bool broken = false;
};

namespace {

// Each thread has its own last error: concurrent calls on different objects do not mix them.
// (Single-threaded wasm has no thread_local destructors; one is all it needs.)
#if TG_THREADS
#define TG_THREAD_LOCAL thread_local
#else
#define TG_THREAD_LOCAL
#endif

struct LastError {
  tg::Status status;
  const char* fixed = nullptr;  // a static message, set without allocating (out of memory)
};
TG_THREAD_LOCAL LastError g_error;

int32_t fail(tg::Status s) {
  g_error.fixed = nullptr;
  g_error.status = std::move(s);
  return -static_cast<int32_t>(g_error.status.code);
}
int32_t fail(const std::string& message) { return fail(tg::Status::error(tg::Code::argument, message)); }
void clear() {
  g_error.fixed = nullptr;
  g_error.status.code = tg::Code::ok;
  g_error.status.message.clear();  // keeps its memory: clearing never allocates
  g_error.status.rule = -1;
}
int32_t fail_fixed(tg::Code code, const char* message) {
  clear();
  g_error.status.code = code;
  g_error.fixed = message;
  return -static_cast<int32_t>(code);
}

// Runs an entry point's body. An exception becomes an error status, and the entry point
// returns what it returns on any error: null, or the negated code. The memory errors report
// TG_ERR_LIMIT without allocating.
template <class R>
R on_error() {
  if constexpr (std::is_pointer<R>::value) return nullptr;
  else return -static_cast<int32_t>(g_error.status.code);
}

#if defined(__cpp_exceptions)
constexpr const char* kOutOfMemory =
    "out of memory: the grammar core could not allocate what this call needs (memory limit)";

template <class Body>
auto guarded(Body&& body) -> decltype(body()) {
  using R = decltype(body());
  try {
    return body();
  } catch (const std::bad_alloc&) {
    fail_fixed(tg::Code::limit, kOutOfMemory);
  } catch (const std::length_error&) {  // a container asked for more than it can hold
    fail_fixed(tg::Code::limit, kOutOfMemory);
  } catch (...) {
    fail_fixed(tg::Code::internal, "internal error: an unexpected exception in the grammar core");
  }
  return on_error<R>();
}
#else
template <class Body>
auto guarded(Body&& body) -> decltype(body()) {
  return body();
}
#endif

constexpr const char* kOverBudget =
    "parser state too large: more than 16,777,216 frames and edges (an ambiguous grammar fed a long text): reset the matcher";
static_assert(tg::FramePool::kMaxNodes == 16777216, "kOverBudget names the limit");
constexpr const char* kOverWork =
    "parser work too large: more than 268,435,456 frame steps in one accept (an ambiguous grammar fed a long text at "
    "once): refused, the matcher is as it was";
static_assert(tg::Matcher::kMaxStepWork == 268435456, "kOverWork names the limit");
constexpr const char* kOverMaskWork =
    "mask work too large: more than 33,554,432 frames looked at to build one token-mask cache (a counted repetition "
    "of an item that may be empty keeps every count alive): refused";
static_assert(tg::MaskWalk::kMaxWork == 33554432, "kOverMaskWork names the limit");

// A call that changes the matcher: refused while the matcher is broken, and the matcher
// stays broken when the call stops on an exception (the flag is cleared only on return).
template <class Body>
int32_t changing(tg_matcher* matcher, Body&& body) {
  if (matcher->broken)
    return fail_fixed(tg::Code::limit, "the matcher was left unusable by an earlier call that failed half-way (out of memory, or parser state too large): reset it");
  matcher->broken = true;
  const int32_t result = body();
  if (matcher->m.over_budget())  // stays broken: what it holds is too large to go on with
    return fail_fixed(tg::Code::limit, kOverBudget);
  matcher->broken = false;
  if (matcher->m.take_over_work()) return fail_fixed(tg::Code::limit, kOverWork);
  if (matcher->m.take_over_mask_work()) return fail_fixed(tg::Code::limit, kOverMaskWork);
  return result;
}

int64_t count_rules(const tg::Automaton& a) {
  int64_t n = 0;
  for (int32_t s : a.start) n += s >= 0;
  return n;
}

// tg_grammar_compile_json_schema's conversion: false (and the error set) where it declines.
bool convert_json_schema(std::string_view text, int32_t flags, int32_t max_whitespace, int32_t unicode_version,
                         tg::Ir* ir) {
  tg::schema::Document doc;
  // Deeper than the Python converter's MAX_NESTING (2,000), or not JSON as json.loads reads it:
  // the Python side reports it.
  if (!tg::schema::parse(text, &doc, 1990).ok() || doc.has_lone_surrogate()) {
    fail(tg::Status::error(tg::Code::declined, "not parsed natively"));
    return false;
  }
  tg::schema::Options o;
  o.any_whitespace = flags & TG_SCHEMA_ANY_WHITESPACE;
  o.strict = flags & TG_SCHEMA_STRICT;
  o.draft7 = flags & TG_SCHEMA_DRAFT7;
  o.integers_without_fraction = flags & TG_SCHEMA_INTEGERS_WITHOUT_FRACTION;
  o.format_assertion = flags & TG_SCHEMA_FORMAT_ASSERTION;
  o.canonical_integers = flags & TG_SCHEMA_CANONICAL_INTEGERS;
  o.max_whitespace = max_whitespace;
  o.unicode_version = tg::schema::unicode_version_name(unicode_version);
  tg::schema::Converted c;
  std::string why;
  if (!tg::schema::convert(doc.root(), o, &c, &why)) {
    fail(tg::Status::error(tg::Code::declined, why));
    return false;
  }
  tg::Status s = tg::read_ir(std::move(c.words), ir);
  if (!s.ok()) fail(std::move(s));
  return s.ok();
}

}  // namespace

extern "C" {

const char* tg_last_error(void) { return g_error.fixed ? g_error.fixed : g_error.status.message.c_str(); }
int32_t tg_last_error_code(void) { return static_cast<int32_t>(g_error.status.code); }
int32_t tg_last_error_rule(void) { return g_error.status.rule; }

void* tg_alloc(int32_t size) { return size > 0 ? std::malloc(static_cast<size_t>(size)) : nullptr; }
void tg_free(void* ptr) { std::free(ptr); }

tg_vocab* tg_vocab_new(int32_t vocab_size, const uint8_t* data, const int32_t* offsets, int32_t n_tokens,
                       const int32_t* special_ids, int32_t n_special, const int32_t* stop_ids,
                       int32_t n_stop) {
  clear();
  return guarded([&]() -> tg_vocab* {
    auto v = std::make_unique<tg_vocab>();
    tg::Status s = tg::build_vocab(vocab_size, data, offsets, n_tokens, special_ids, n_special, stop_ids,
                                   n_stop, &v->v);
    if (!s.ok()) {
      fail(std::move(s));
      return nullptr;
    }
    return v.release();
  });
}

void tg_vocab_free(tg_vocab* vocab) { delete vocab; }

tg_grammar* tg_grammar_compile(const tg_vocab* vocab, const int32_t* words, int32_t n_words) {
  clear();
  return guarded([&]() -> tg_grammar* {
    if (!vocab) {
      fail("null vocabulary");
      return nullptr;
    }
    auto g = std::make_unique<tg_grammar>();
    tg::Status s = tg::compile_grammar(vocab->v, words, n_words, &g->g);
    if (!s.ok()) {
      fail(std::move(s));
      return nullptr;
    }
    return g.release();
  });
}

tg_grammar* tg_grammar_compile_json_schema(const tg_vocab* vocab, const char* text, int32_t n_text, int32_t flags,
                                           int32_t max_whitespace, int32_t unicode_version) {
  clear();
  return guarded([&]() -> tg_grammar* {
    if (!vocab || n_text < 0 || (!text && n_text)) {
      fail("null vocabulary or text");
      return nullptr;
    }
    // The document and the conversion's words are gone before the automaton is built (the
    // compile's peak memory, which fresh pages cost a large schema's compile)
    tg::Ir ir;
    if (!convert_json_schema(std::string_view(text, size_t(n_text)), flags, max_whitespace, unicode_version, &ir))
      return nullptr;
    auto g = std::make_unique<tg_grammar>();
    tg::Status s = tg::compile_grammar(vocab->v, ir, &g->g);
    if (!s.ok()) {
      fail(std::move(s));
      return nullptr;
    }
    return g.release();
  });
}

int32_t tg_json_schema_top(const char* text, int32_t n_text, int32_t max_depth, char* out, int32_t cap) {
  clear();
  return guarded([&]() -> int32_t {
    if (n_text < 0 || (!text && n_text) || cap < 0 || (cap > 0 && !out)) return fail("null text or bad buffer");
    tg::schema::Document doc;
    tg::Status s = tg::schema::parse(std::string_view(text, size_t(n_text)), &doc, max_depth);
    if (!s.ok()) return fail(std::move(s));
    const tg::schema::Value& root = doc.root();
    std::string top;
    if (root.is_bool()) {
      top = root.boolean() ? "true" : "false";
    } else if (!root.is_object()) {
      top = "null";
    } else {
      top = "{";
      for (const char* key : {"$schema", "$id"}) {
        const tg::schema::Value* v = root.find(key);
        if (v == nullptr) continue;
        if (top.size() > 1) top += ", ";
        tg::schema::dump_string(key, &top);
        top += ": ";
        tg::schema::dump(*v, &top);
      }
      top += "}";
    }
    if (top.size() > size_t(INT32_MAX)) return fail(tg::Status::error(tg::Code::limit, "too long a $schema or $id"));
    if (top.size() <= size_t(cap)) std::memcpy(out, top.data(), top.size());
    return static_cast<int32_t>(top.size());
  });
}

void tg_grammar_free(tg_grammar* grammar) { delete grammar; }

int64_t tg_grammar_stat(const tg_grammar* grammar, int32_t which) {
  if (!grammar) return -1;
  const tg::Grammar& g = grammar->g;
  switch (which) {
    case TG_STAT_RULES: return count_rules(g.automaton);
    case TG_STAT_STATES: return g.automaton.n_states();
    case TG_STAT_MASK_CACHES: return g.caches_built.load(std::memory_order_relaxed);
    case TG_STAT_MASK_CACHE_BYTES: return g.cache_bytes.load(std::memory_order_relaxed);
    case TG_STAT_EMPTY: return g.automaton.empty;
    default: return -1;
  }
}

int32_t tg_grammar_warm(tg_grammar* grammar, int32_t max_states) {
  return guarded([&] {
    if (!grammar) return fail("null grammar");
    const int32_t built = grammar->g.warm(max_states);
    return built < 0 ? fail_fixed(tg::Code::limit, kOverMaskWork) : built;
  });
}

tg_matcher* tg_matcher_new(tg_grammar* grammar) {
  clear();
  return guarded([&]() -> tg_matcher* {
    if (grammar) return new tg_matcher(&grammar->g);
    fail("null grammar");
    return nullptr;
  });
}

void tg_matcher_free(tg_matcher* matcher) { delete matcher; }

int32_t tg_matcher_fill_mask(tg_matcher* matcher, uint32_t* words, int32_t n_words) {
  return guarded([&] {
    if (!matcher || !words) return fail("null matcher or buffer");
    const int32_t need = matcher->m.vocab().words();
    if (n_words < need) return fail("bitmask too short: need " + std::to_string(need) + " words");
    return changing(matcher, [&] {
      matcher->m.fill_mask(words);
      return 0;
    });
  });
}

int32_t tg_matcher_accept_token(tg_matcher* matcher, int32_t token_id) {
  return guarded([&] {
    if (!matcher) return fail("null matcher");
    if (token_id < 0 || token_id >= matcher->m.vocab().vocab_size)
      return fail("token id " + std::to_string(token_id) + " out of range");
    return changing(matcher, [&] { return matcher->m.accept_token(token_id); });
  });
}

int32_t tg_matcher_accept_bytes(tg_matcher* matcher, const uint8_t* data, int32_t n) {
  return guarded([&] {
    if (!matcher || n < 0 || (n > 0 && !data)) return fail("null matcher or bad buffer");
    return changing(matcher, [&] { return matcher->m.accept_bytes(data, n); });
  });
}

int32_t tg_matcher_rollback(tg_matcher* matcher, int32_t n) {
  return guarded([&] {
    if (!matcher) return fail("null matcher");
    return changing(matcher, [&] {
      if (matcher->m.rollback(n)) return 0;
      return fail("cannot roll back " + std::to_string(n) + " steps: history has " +
                  std::to_string(matcher->m.history_length()));
    });
  });
}

int32_t tg_matcher_history_length(const tg_matcher* matcher) {
  return guarded([&] { return matcher ? matcher->m.history_length() : fail("null matcher"); });
}
int32_t tg_matcher_is_terminated(const tg_matcher* matcher) {
  return guarded([&] { return matcher ? int32_t(matcher->m.is_terminated()) : fail("null matcher"); });
}
int32_t tg_matcher_can_terminate(const tg_matcher* matcher) {
  return guarded([&] { return matcher ? int32_t(matcher->m.can_terminate()) : fail("null matcher"); });
}

int32_t tg_matcher_reset(tg_matcher* matcher) {
  return guarded([&] {
    if (!matcher) return fail("null matcher");
    matcher->broken = true;  // until the reset completes
    matcher->m.reset();
    matcher->broken = false;
    return 0;
  });
}

int32_t tg_matcher_jump_forward(tg_matcher* matcher, uint8_t* out, int32_t cap) {
  return guarded([&] {
    if (!matcher || cap < 0 || (cap > 0 && !out)) return fail("null matcher or bad buffer");
    return changing(matcher, [&] { return matcher->m.jump_forward(out, cap); });
  });
}

int32_t tg_matcher_shortest_completion(tg_matcher* matcher, uint8_t* out, int32_t cap) {
  return guarded([&] {
    if (!matcher || cap < 0 || (cap > 0 && !out)) return fail("null matcher or bad buffer");
    return changing(matcher, [&]() -> int32_t {
      std::vector<uint8_t> bytes;
      const int64_t n = matcher->m.shortest_completion(&bytes);
      if (n < 0) return TG_NO_COMPLETION;
      if (n > tg::Matcher::kMaxCompletion)
        return fail(tg::Status::error(tg::Code::limit, "the shortest completion is " + std::to_string(n) +
                                                           " bytes long, too long to spell out"));
      if (n > 0 && n <= cap) std::memcpy(out, bytes.data(), static_cast<size_t>(n));
      return static_cast<int32_t>(n);
    });
  });
}

}  // extern "C"
