#include "json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <new>
#include <system_error>
#include <type_traits>

namespace tg::schema {

static_assert(std::is_trivially_copyable<Value>::value && std::is_trivially_copyable<Member>::value,
              "values are copied into the arena as plain bytes");

namespace {

constexpr uint32_t kSmallObject = 8;        // up to this many members, lookups scan
constexpr size_t kFirstBlock = 4096;
constexpr size_t kLargestBlock = size_t{1} << 20;

// Bytes a string holds as they are: printable ASCII but the quote and the backslash.
struct ByteTable {
  bool at[256];
};
constexpr ByteTable plain_bytes() {
  ByteTable t{};
  for (int b = 0; b < 256; ++b) t.at[b] = b >= 0x20 && b < 0x80 && b != '"' && b != '\\';
  return t;
}
constexpr ByteTable kPlain = plain_bytes();

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The length of the UTF-8 sequence at p (p[0] >= 0x80), or 0 when Python's strict decoder would
// refuse it: an overlong form, a surrogate, past U+10FFFF, or cut short.
size_t utf8_length(const uint8_t* p, const uint8_t* end) {
  const uint8_t b = p[0];
  const auto cont = [&](size_t i, uint8_t lo, uint8_t hi) { return p + i < end && p[i] >= lo && p[i] <= hi; };
  if (b >= 0xC2 && b <= 0xDF) return cont(1, 0x80, 0xBF) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF)
    return cont(1, b == 0xE0 ? 0xA0 : 0x80, b == 0xED ? 0x9F : 0xBF) && cont(2, 0x80, 0xBF) ? 3 : 0;
  if (b >= 0xF0 && b <= 0xF4)
    return cont(1, b == 0xF0 ? 0x90 : 0x80, b == 0xF4 ? 0x8F : 0xBF) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)
               ? 4
               : 0;
  return 0;
}

// UTF-8, and for a surrogate the same 3-byte form (WTF-8).
void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(char(cp));
  } else if (cp < 0x800) {
    out->push_back(char(0xC0 | (cp >> 6)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(char(0xE0 | (cp >> 12)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(char(0xF0 | (cp >> 18)));
    out->push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(char(0x80 | (cp & 0x3F)));
  }
}

// repr(d) into out (32 bytes): Python's layout of the shortest round-trip digits, which
// to_chars gives in scientific form. Python writes an exponent when the decimal point would fall
// more than 16 digits right of the first digit or 4 or more zeros left of it.
size_t format_repr(double d, char* out) {
  if (!std::isfinite(d)) {
    const char* word = std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf";
    const size_t len = std::strlen(word);
    std::memcpy(out, word, len);
    return len;
  }
  char sci[40];
  const char* end = std::to_chars(sci, sci + sizeof sci, d, std::chars_format::scientific).ptr;
  const char* p = sci;
  char* o = out;
  if (*p == '-') *o++ = *p++;
  char digits[24];
  int nd = 0;
  for (; *p != 'e'; ++p)
    if (*p != '.') digits[nd++] = *p;
  const bool exp_negative = p[1] == '-';
  int exp = 0;
  for (p += 2; p < end; ++p) exp = exp * 10 + (*p - '0');
  if (exp_negative) exp = -exp;
  const int point = exp + 1;  // digits before the decimal point
  if (point <= -4 || point > 16) {
    *o++ = digits[0];
    if (nd > 1) {
      *o++ = '.';
      std::memcpy(o, digits + 1, nd - 1);
      o += nd - 1;
    }
    *o++ = 'e';
    *o++ = exp < 0 ? '-' : '+';
    const int a = exp < 0 ? -exp : exp;
    if (a >= 100) *o++ = char('0' + a / 100);
    *o++ = char('0' + a / 10 % 10);
    *o++ = char('0' + a % 10);
  } else if (point <= 0) {
    *o++ = '0';
    *o++ = '.';
    for (int i = 0; i < -point; ++i) *o++ = '0';
    std::memcpy(o, digits, nd);
    o += nd;
  } else if (point >= nd) {
    std::memcpy(o, digits, nd);
    o += nd;
    for (int i = nd; i < point; ++i) *o++ = '0';
    *o++ = '.';
    *o++ = '0';
  } else {
    std::memcpy(o, digits, point);
    o += point;
    *o++ = '.';
    std::memcpy(o, digits + point, nd - point);
    o += nd - point;
  }
  return size_t(o - out);
}

// Whether a WTF-8 string holds a surrogate: ED A0..BF is the start of one, and of nothing else.
bool wtf8_surrogate(std::string_view s) {
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (uint8_t(s[i]) == 0xED && uint8_t(s[i + 1]) >= 0xA0) return true;
  return false;
}

// Whether any key or string under `root` holds a surrogate (with an explicit stack).
bool holds_surrogate(const Value& root) {
  std::vector<const Value*> todo = {&root};
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (v->is_string() && wtf8_surrogate(v->text())) return true;
    for (const Value& item : v->items()) todo.push_back(&item);
    for (const Member& m : v->members()) {
      if (wtf8_surrogate(m.key)) return true;
      todo.push_back(&m.value);
    }
  }
  return false;
}

}  // namespace

// ---- the arena ----------------------------------------------------------------------------

void Document::clear() {
  blocks_.clear();
  free_ = nullptr;
  free_size_ = 0;
  next_block_ = kFirstBlock;
  root_ = Value();
  lone_surrogate_ = false;
}

void* Document::allocate(size_t bytes, size_t align) {
  if (bytes == 0) return nullptr;
  size_t pad = (align - reinterpret_cast<uintptr_t>(free_) % align) % align;
  if (pad + bytes > free_size_) {
    // Blocks double up to 1 MiB, so a large document takes few of them and a small one little.
    const size_t size = std::max(bytes + align, next_block_);
    next_block_ = std::min(next_block_ * 2, kLargestBlock);
    blocks_.emplace_back(new char[size]);
    free_ = blocks_.back().get();
    free_size_ = size;
    pad = (align - reinterpret_cast<uintptr_t>(free_) % align) % align;
  }
  char* p = free_ + pad;
  free_ += pad + bytes;
  free_size_ -= pad + bytes;
  return p;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::object) return nullptr;
  const Member* m = static_cast<const Member*>(data_);
  if (u_.index == nullptr) {
    for (uint32_t i = 0; i < size_; ++i)
      if (m[i].key == key) return &m[i].value;
    return nullptr;
  }
  const uint32_t* at = std::lower_bound(u_.index, u_.index + size_, key,
                                        [m](uint32_t i, std::string_view k) { return m[i].key < k; });
  return at != u_.index + size_ && m[*at].key == key ? &m[*at].value : nullptr;
}

// ---- the parser ---------------------------------------------------------------------------

// One pass over the text with an explicit stack of open containers. Every value is first a
// Member on `pending_` (an array element's key empty) and moves into the arena, with its
// siblings, when its container closes: a value is copied twice at most, whatever the nesting.
class Builder {
 public:
  Builder(std::string_view text, Document* doc, int32_t max_depth)
      : chars_(text.data()), s_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()), doc_(doc),
        max_depth_(max_depth) {}

  Status run(size_t* error_offset) {
    if (n_ > kMaxTextBytes) fail(Code::limit, 0, "JSON text larger than 1 GiB");
    else if (parse_all()) return {};
    if (error_offset != nullptr) *error_offset = error_at_;
    doc_->clear();
    return Status::error(code_, std::string("JSON: ") + error_ + " at byte " + std::to_string(error_at_));
  }

 private:
  struct Frame {
    bool object;
    uint32_t start;  // its first element's place on pending_
  };

  bool fail(Code code, size_t at, const char* what) {
    code_ = code;
    error_at_ = at;
    error_ = what;
    return false;
  }

  // Only these four: json.loads takes no other whitespace.
  void skip_ws() {
    while (pos_ < n_ && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }

  bool literal(std::string_view word) {
    if (n_ - pos_ < word.size() || std::memcmp(chars_ + pos_, word.data(), word.size()) != 0) return false;
    pos_ += word.size();
    return true;
  }

  std::string_view keep(std::string_view bytes) {
    char* p = static_cast<char*>(doc_->allocate(bytes.size(), 1));
    if (p != nullptr) std::memcpy(p, bytes.data(), bytes.size());
    return {p, bytes.size()};
  }

  static Value make(Kind kind, std::string_view text = {}) {
    Value v;
    v.kind_ = kind;
    v.data_ = text.data();
    v.size_ = uint32_t(text.size());
    return v;
  }

  Value make_number(double d) {
    char repr[32];
    Value v = make(Kind::number, keep(std::string_view(repr, format_repr(d, repr))));
    v.u_.number = d;
    return v;
  }

  bool parse_all() {
    doc_->clear();
    doc_->next_block_ = std::min(std::max(n_, kFirstBlock), kLargestBlock);
    pending_.push_back(Member{});  // the root's place
    for (;;) {
      // A value is expected: its place is pending_.back().
      skip_ws();
      if (pos_ >= n_) return fail(Code::argument, pos_, "expecting a value");
      const uint8_t c = s_[pos_];
      if (c == '[' || c == '{') {
        if (int64_t(frames_.size()) >= max_depth_) return fail(Code::limit, pos_, "nesting deeper than the limit");
        frames_.push_back(Frame{c == '{', uint32_t(pending_.size())});
        ++pos_;
        skip_ws();
        if (pos_ < n_ && s_[pos_] == (c == '[' ? ']' : '}')) {
          ++pos_;
          close();
        } else if (c == '{') {
          if (!read_key()) return false;
          continue;
        } else {
          pending_.push_back(Member{});
          continue;
        }
      } else if (!read_scalar(&pending_.back().value)) {
        return false;
      }
      // A value is complete: what follows it is its container's.
      for (;;) {
        skip_ws();
        if (frames_.empty()) {
          if (pos_ != n_) return fail(Code::argument, pos_, "extra data after the value");
          doc_->root_ = pending_[0].value;
          // A repeated key's earlier values are gone: only what is left counts.
          if (doc_->lone_surrogate_) doc_->lone_surrogate_ = holds_surrogate(doc_->root_);
          return true;
        }
        const bool object = frames_.back().object;
        if (pos_ < n_ && s_[pos_] == ',') {
          ++pos_;
          if (!object) {
            pending_.push_back(Member{});
          } else {
            skip_ws();
            if (!read_key()) return false;
          }
          break;
        }
        if (pos_ >= n_ || s_[pos_] != (object ? '}' : ']'))
          return fail(Code::argument, pos_, object ? "expecting ',' or '}'" : "expecting ',' or ']'");
        ++pos_;
        close();
      }
    }
  }

  // A key, the colon after it, and the place for its value.
  bool read_key() {
    if (pos_ >= n_ || s_[pos_] != '"') return fail(Code::argument, pos_, "expecting a key in double quotes");
    std::string_view key;
    if (!read_string(&key)) return false;
    skip_ws();
    if (pos_ >= n_ || s_[pos_] != ':') return fail(Code::argument, pos_, "expecting ':'");
    ++pos_;
    pending_.push_back(Member{key, Value()});
    return true;
  }

  bool read_scalar(Value* v) {
    switch (s_[pos_]) {
      case '"': {
        std::string_view s;
        if (!read_string(&s)) return false;
        *v = make(Kind::string, s);
        return true;
      }
      case 'n':
        if (!literal("null")) break;
        *v = make(Kind::null);
        return true;
      case 't':
      case 'f': {
        const bool t = s_[pos_] == 't';
        if (!literal(t ? "true" : "false")) break;
        *v = make(Kind::boolean);
        v->u_.boolean = t;
        return true;
      }
      case 'N':
        if (!literal("NaN")) break;
        *v = make_number(std::nan(""));
        return true;
      case 'I':
        if (!literal("Infinity")) break;
        *v = make_number(HUGE_VAL);
        return true;
      default:
        if (s_[pos_] == '-' || is_digit(s_[pos_])) return read_number(v);
    }
    return fail(Code::argument, pos_, "expecting a value");
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and -Infinity. A fraction or an exponent
  // makes it a float; a '.' or an 'e' without digits after it ends the number before it (and is
  // then an error where the number stands).
  bool read_number(Value* v) {
    const size_t start = pos_;
    const bool negative = s_[pos_] == '-';
    if (negative) {
      ++pos_;
      if (literal("Infinity")) {
        *v = make_number(-HUGE_VAL);
        return true;
      }
    }
    if (pos_ >= n_ || !is_digit(s_[pos_])) return fail(Code::argument, start, "expecting a value");
    if (s_[pos_] == '0') ++pos_;
    else
      while (pos_ < n_ && is_digit(s_[pos_])) ++pos_;
    const size_t int_end = pos_;
    bool is_float = false;
    if (pos_ + 1 < n_ && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      for (pos_ += 2; pos_ < n_ && is_digit(s_[pos_]);) ++pos_;
      is_float = true;
    }
    size_t exp_at = 0;
    if (pos_ < n_ && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < n_ && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < n_ && is_digit(s_[q])) {
        exp_at = pos_;
        for (pos_ = q; pos_ < n_ && is_digit(s_[pos_]);) ++pos_;
        is_float = true;
      }
    }
    if (is_float) return read_float(start, int_end, exp_at, v);
    const size_t first = start + negative, digits = int_end - first;
    if (digits > kMaxIntDigits) return fail(Code::argument, start, "integer of more than 4300 digits");
    // 19 digits fit in 64 bits unsigned; int64 holds up to 2^63 - 1, and -2^63.
    uint64_t magnitude = 0;
    bool fits = digits <= 19;
    if (fits) {
      for (size_t i = first; i < int_end; ++i) magnitude = magnitude * 10 + (s_[i] - '0');
      fits = magnitude <= (negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1);
    }
    // No leading zeros can occur; str() drops the sign of zero.
    const size_t from = negative && magnitude == 0 && digits == 1 ? first : start;
    *v = make(Kind::integer, keep(std::string_view(chars_ + from, int_end - from)));
    v->fits_ = fits;
    if (fits) v->u_.integer = negative ? -int64_t(magnitude - 1) - 1 : int64_t(magnitude);
    return true;
  }

  // float(text), correctly rounded as Python's is (from_chars is too). Out of range, it is an
  // infinity or a zero of the text's sign; which one, the decimal exponent of the first
  // nonzero digit says (only near +-308 can it be either).
  bool read_float(size_t start, size_t int_end, size_t exp_at, Value* v) {
    double d = 0;
    const auto r = std::from_chars(chars_ + start, chars_ + pos_, d);
    if (r.ec == std::errc::result_out_of_range) {
      const bool negative = s_[start] == '-';
      const size_t first = start + negative;
      int64_t lead = int64_t(int_end - first) - 1;
      if (s_[first] == '0') {
        size_t i = int_end + 1;
        while (i < pos_ && s_[i] == '0') ++i;
        lead = -int64_t(i - int_end);
      }
      if (exp_at != 0) {
        size_t i = exp_at + 1;
        const bool exp_negative = s_[i] == '-';
        if (s_[i] == '+' || s_[i] == '-') ++i;
        int64_t exp = 0;
        for (; i < pos_; ++i) exp = std::min<int64_t>(exp * 10 + (s_[i] - '0'), int64_t{1} << 40);
        lead += exp_negative ? -exp : exp;
      }
      d = lead > 0 ? HUGE_VAL : 0.0;
      if (negative) d = -d;
    } else if (r.ec != std::errc() || r.ptr != chars_ + pos_) {
      return fail(Code::internal, start, "a number from_chars does not read");
    }
    *v = make_number(d);
    return true;
  }

  // At an opening quote: the string's bytes, copied into the arena. Runs without escapes are
  // copied whole; a string with escapes is decoded into buf_ first.
  bool read_string(std::string_view* out) {
    const size_t open = pos_;
    size_t run = ++pos_;
    bool escaped = false;
    for (;;) {
      while (pos_ < n_ && kPlain.at[s_[pos_]]) ++pos_;
      if (pos_ >= n_) return fail(Code::argument, open, "unterminated string");
      const uint8_t b = s_[pos_];
      if (b >= 0x80) {
        const size_t len = utf8_length(s_ + pos_, s_ + n_);
        if (len == 0) return fail(Code::argument, pos_, "invalid UTF-8");
        pos_ += len;
        continue;
      }
      if (b == '"') break;
      if (b < 0x20) return fail(Code::argument, pos_, "control character in a string");
      if (!escaped) buf_.clear();
      escaped = true;
      buf_.append(chars_ + run, pos_ - run);
      if (!read_escape(open)) return false;
      run = pos_;
    }
    std::string_view bytes(chars_ + run, pos_ - run);
    if (escaped) {
      buf_.append(bytes.data(), bytes.size());
      bytes = buf_;
    }
    ++pos_;
    *out = keep(bytes);
    return true;
  }

  bool hex4(size_t at, uint32_t* cp) {
    if (n_ < 4 || at > n_ - 4) return false;
    uint32_t v = 0;
    for (size_t i = at; i < at + 4; ++i) {
      const int h = hex_value(s_[i]);
      if (h < 0) return false;
      v = v << 4 | uint32_t(h);
    }
    *cp = v;
    return true;
  }

  // At a backslash. An escaped high surrogate joins an escaped low one right after it; any
  // other surrogate stays alone, as Python keeps it.
  bool read_escape(size_t open) {
    const size_t at = pos_;
    if (pos_ + 1 >= n_) return fail(Code::argument, open, "unterminated string");
    char simple = 0;
    switch (s_[pos_ + 1]) {
      case '"': simple = '"'; break;
      case '\\': simple = '\\'; break;
      case '/': simple = '/'; break;
      case 'b': simple = '\b'; break;
      case 'f': simple = '\f'; break;
      case 'n': simple = '\n'; break;
      case 'r': simple = '\r'; break;
      case 't': simple = '\t'; break;
      case 'u': break;
      default: return fail(Code::argument, at, "invalid escape");
    }
    if (simple != 0) {
      buf_.push_back(simple);
      pos_ += 2;
      return true;
    }
    uint32_t cp = 0, low = 0;
    if (!hex4(pos_ + 2, &cp)) return fail(Code::argument, at, "invalid \\uXXXX escape");
    pos_ += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF && pos_ + 1 < n_ && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
      if (!hex4(pos_ + 2, &low)) return fail(Code::argument, pos_, "invalid \\uXXXX escape");
      if (low >= 0xDC00 && low <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        pos_ += 6;
      }
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) doc_->lone_surrogate_ = true;
    append_utf8(cp, &buf_);
    return true;
  }

  // The innermost container is complete: its values move into the arena and it takes the
  // place its parent had made for it.
  void close() {
    const Frame f = frames_.back();
    frames_.pop_back();
    const uint32_t n = uint32_t(pending_.size() - f.start);
    Value v;
    if (!f.object) {
      Value* items = static_cast<Value*>(doc_->allocate(n * sizeof(Value), alignof(Value)));
      for (uint32_t i = 0; i < n; ++i) new (items + i) Value(pending_[f.start + i].value);
      v = make(Kind::array);
      v.data_ = items;
      v.size_ = n;
    } else {
      v = close_object(f.start, n);
    }
    pending_.resize(f.start);
    pending_.back().value = v;
  }

  // A dict's rule for a repeated key: the place of its first occurrence, the value of its last.
  // A small object scans; a large one sorts its keys (n log n whatever the keys, where a hash
  // could be made to collide), and keeps the order as its lookup index.
  Value close_object(uint32_t start, uint32_t n) {
    const Member* in = pending_.data() + start;
    Member* members = static_cast<Member*>(doc_->allocate(n * sizeof(Member), alignof(Member)));
    uint32_t m = 0;
    const uint32_t* index = nullptr;
    if (n <= kSmallObject) {
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t j = 0;
        while (j < m && members[j].key != in[i].key) ++j;
        if (j < m) members[j].value = in[i].value;
        else new (members + m++) Member(in[i]);
      }
    } else {
      order_.resize(n);
      for (uint32_t i = 0; i < n; ++i) order_[i] = i;
      std::sort(order_.begin(), order_.end(), [in](uint32_t a, uint32_t b) {
        const int c = in[a].key.compare(in[b].key);
        return c < 0 || (c == 0 && a < b);
      });
      // source_[i]: for a key's first occurrence i, its last occurrence; kNone for the others.
      constexpr uint32_t kNone = ~uint32_t{0};
      source_.assign(n, kNone);
      for (uint32_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && in[order_[b]].key == in[order_[a]].key;) ++b;
        source_[order_[a]] = order_[b - 1];
      }
      position_.resize(n);
      for (uint32_t i = 0; i < n; ++i) {
        if (source_[i] == kNone) continue;
        position_[i] = m;
        new (members + m++) Member{in[i].key, in[source_[i]].value};
      }
      uint32_t* sorted = static_cast<uint32_t*>(doc_->allocate(m * sizeof(uint32_t), alignof(uint32_t)));
      for (uint32_t a = 0, k = 0; a < n; ++a)
        if (source_[order_[a]] != kNone) sorted[k++] = position_[order_[a]];
      index = sorted;
    }
    Value v = make(Kind::object);
    v.data_ = members;
    v.size_ = m;
    v.u_.index = index;
    return v;
  }

  const char* chars_;
  const uint8_t* s_;
  size_t n_;
  size_t pos_ = 0;
  Document* doc_;
  int32_t max_depth_;
  std::vector<Member> pending_;
  std::vector<Frame> frames_;
  std::string buf_;
  std::vector<uint32_t> order_, source_, position_;
  Code code_ = Code::ok;
  size_t error_at_ = 0;
  const char* error_ = "";
};

Status parse(std::string_view text, Document* out, int32_t max_depth, size_t* error_offset) {
  return Builder(text, out, max_depth).run(error_offset);
}

// ---- the writer ---------------------------------------------------------------------------

void dump_string(std::string_view s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  const auto escape_unit = [out](uint32_t u) {
    const char e[6] = {'\\', 'u', kHex[u >> 12], kHex[(u >> 8) & 15], kHex[(u >> 4) & 15], kHex[u & 15]};
    out->append(e, 6);
  };
  const uint8_t* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t* const end = p + s.size();
  const uint8_t* run = p;
  out->push_back('"');
  while (p < end) {
    const uint8_t b = *p;
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
      ++p;
      continue;
    }
    out->append(reinterpret_cast<const char*>(run), p - run);
    // A code point from (W)UTF-8; a byte that starts no sequence stands for itself.
    uint32_t cp = b;
    size_t len = 1;
    if (b >= 0xC0) {
      len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      cp = b & (0x7F >> len);
      for (size_t i = 1; i < len; ++i) {
        if (p + i >= end || (p[i] & 0xC0) != 0x80) {
          cp = b;
          len = 1;
          break;
        }
        cp = cp << 6 | (p[i] & 0x3F);
      }
    }
    p += len;
    run = p;
    switch (cp) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default:
        if (cp >= 0x10000) {
          escape_unit(0xD800 + ((cp - 0x10000) >> 10));
          escape_unit(0xDC00 + ((cp - 0x10000) & 0x3FF));
        } else {
          escape_unit(cp);
        }
    }
  }
  out->append(reinterpret_cast<const char*>(run), p - run);
  out->push_back('"');
}

// Depth-first with an explicit stack: a container's next child, or its close.
void dump(const Value& root, std::string* out) {
  struct Frame {
    const Value* container;
    uint32_t next;
  };
  std::vector<Frame> stack;
  const Value* v = &root;
  while (v != nullptr) {
    switch (v->kind()) {
      case Kind::null: out->append("null"); break;
      case Kind::boolean: out->append(v->boolean() ? "true" : "false"); break;
      case Kind::integer: out->append(v->text()); break;
      case Kind::number:
        if (std::isnan(v->number())) out->append("NaN");
        else if (std::isinf(v->number())) out->append(v->number() > 0 ? "Infinity" : "-Infinity");
        else out->append(v->text());
        break;
      case Kind::string: dump_string(v->text(), out); break;
      case Kind::array:
      case Kind::object:
        if (v->size() == 0) {
          out->append(v->is_array() ? "[]" : "{}");
        } else {
          out->push_back(v->is_array() ? '[' : '{');
          stack.push_back(Frame{v, 0});
        }
        break;
    }
    v = nullptr;
    while (!stack.empty() && v == nullptr) {
      Frame& f = stack.back();
      if (f.next == f.container->size()) {
        out->push_back(f.container->is_array() ? ']' : '}');
        stack.pop_back();
        continue;
      }
      if (f.next > 0) out->append(", ");
      if (f.container->is_array()) {
        v = &f.container->items()[f.next];
      } else {
        const Member& m = f.container->members()[f.next];
        dump_string(m.key, out);
        out->append(": ");
        v = &m.value;
      }
      ++f.next;
    }
  }
}

std::string dumps(const Value& value) {
  std::string out;
  dump(value, &out);
  return out;
}

std::string float_repr(double d) {
  char buf[32];
  return std::string(buf, format_repr(d, buf));
}

}  // namespace tg::schema
