#include "text.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace tg::schema {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// escape_byte's answers for the 128 ASCII bytes, built at compile time.
struct EscapeTable {
  char text[0x80][6] = {};
  uint8_t size[0x80] = {};
  constexpr EscapeTable() {
    for (int b = 0; b < 0x20; ++b) {
      const char u[6] = {'\\', 'u', '0', '0', kHex[b >> 4], kHex[b & 15]};
      for (int i = 0; i < 6; ++i) text[b][i] = u[i];
      size[b] = 6;
    }
    const char shorts[7][2] = {{'"', '"'}, {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};
    for (const auto& s : shorts) {
      const int b = s[0];
      text[b][0] = '\\';
      text[b][1] = s[1];
      size[b] = 2;
    }
  }
};
constexpr EscapeTable kEscapes;

// ir.normalize_ranges over a byte set's operands (lo, hi pairs).
std::vector<IrRange64> normalized(IrSpan<int32_t> pairs) {
  std::vector<IrRange> ranges;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) ranges.push_back({pairs[i], pairs[i + 1]});
  return normalize_ranges(ranges);
}

Expr one_byte_set(IrBuilder& ir, const std::vector<int32_t>& bytes) {
  std::vector<IrRange> ranges;
  for (int32_t b : bytes) ranges.push_back({b, b});
  return ir.byte_set(ranges);
}

// _escape_set: a byte set without the bytes JSON escapes, or with them as their escapes, one
// small trie: a backslash, then a letter or "u00" and two hex digits.
Expr escape_set(IrBuilder& ir, Expr e) {
  const IrSpan<int32_t> pairs = ir.operands(e);
  std::vector<int32_t> special;
  for (int32_t b = 0; b < 0x80; ++b) {
    if (kEscapes.size[b] == 0) continue;
    for (size_t i = 0; i + 1 < pairs.size(); i += 2)
      if (pairs[i] <= b && b <= pairs[i + 1]) {
        special.push_back(b);
        break;
      }
  }
  if (special.empty()) return e;
  std::vector<IrRange> keep;
  size_t s = 0;  // specials and ranges are both ascending
  for (const IrRange64& r : normalized(pairs)) {
    int64_t start = r.lo;
    for (; s < special.size() && special[s] <= r.hi; ++s) {
      if (special[s] < r.lo) continue;
      if (start < special[s]) keep.push_back({int32_t(start), special[s] - 1});
      start = special[s] + 1;
    }
    if (start <= r.hi) keep.push_back({int32_t(start), int32_t(r.hi)});
  }
  std::vector<int32_t> letters;
  std::vector<std::vector<int32_t>> by_high(2);  // a \u00XX escape's last digit, by its X
  for (int32_t b : special) {
    if (kEscapes.size[b] == 2)
      letters.push_back(kEscapes.text[b][1]);
    else
      by_high[b >> 4].push_back(kHex[b & 15]);
  }
  std::vector<Expr> tails;
  if (!letters.empty()) tails.push_back(one_byte_set(ir, letters));
  std::vector<Expr> digits;
  for (int32_t high = 0; high < 2; ++high)
    if (!by_high[high].empty())
      digits.push_back(ir.seq(ir.literal(std::string_view(&kHex[high], 1)), one_byte_set(ir, by_high[high])));
  if (!digits.empty()) tails.push_back(ir.seq(ir.literal("u00"), ir.alt(digits)));
  std::vector<Expr> items;
  if (!keep.empty()) items.push_back(ir.byte_set(keep));
  items.push_back(ir.seq(ir.literal("\\"), ir.alt(tails)));
  return ir.alt(items);
}

// _escape_bytes: the bytes with each one JSON escapes replaced (one Bytes node, or EMPTY).
Expr escape_bytes(IrBuilder& ir, std::string_view data) {
  std::string out;
  for (unsigned char b : data) {
    if (b < 0x80 && kEscapes.size[b] != 0)
      out.append(kEscapes.text[b], kEscapes.size[b]);
    else
      out += char(b);
  }
  return out.empty() ? IrBuilder::kEmpty : ir.make_bytes(out);
}

// _hex_digit: a hex digit of value d in either case (\u escapes take both).
Expr hex_digit(IrBuilder& ir, int32_t d) {
  const int32_t lower = kHex[d], upper = d < 10 ? lower : lower - 'a' + 'A';
  return one_byte_set(ir, {lower, upper});
}

// _non_ascii: a character above ASCII raw or as its \u escape (a surrogate pair past the BMP).
Expr non_ascii(IrBuilder& ir, int32_t cp, std::string_view raw) {
  int32_t units[2] = {cp, 0};
  size_t n = 1;
  if (cp > 0xFFFF) units[0] = 0xD800 + ((cp - 0x10000) >> 10), units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF), n = 2;
  std::vector<Expr> escape;  // ir.seq of the _u_escape sequences: flattened into one
  for (size_t u = 0; u < n; ++u) {
    escape.push_back(ir.literal("\\u"));
    for (int shift = 12; shift >= 0; shift -= 4) escape.push_back(hex_digit(ir, units[u] >> shift & 15));
  }
  return ir.alt(ir.make_bytes(raw), ir.seq(escape));
}

}  // namespace

bool decode_utf8(std::string_view s, size_t i, bool surrogates, int32_t* cp, size_t* len) {
  const auto byte = [&](size_t k) { return i + k < s.size() ? uint8_t(s[i + k]) : uint8_t(0); };
  const uint8_t b0 = byte(0);
  int32_t lo = 0, c = 0;
  size_t n = 0;
  if (b0 < 0x80) {
    n = 1, c = b0;
  } else if (b0 >= 0xC2 && b0 < 0xE0) {
    n = 2, c = b0 & 0x1F, lo = 0x80;
  } else if (b0 >= 0xE0 && b0 < 0xF0) {
    n = 3, c = b0 & 0x0F, lo = 0x800;
  } else if (b0 >= 0xF0 && b0 < 0xF5) {
    n = 4, c = b0 & 0x07, lo = 0x10000;
  } else {
    return false;
  }
  for (size_t k = 1; k < n; ++k) {
    const uint8_t b = byte(k);
    if ((b & 0xC0) != 0x80) return false;
    c = c << 6 | (b & 0x3F);
  }
  if (c < lo || c > kMaxCodePoint || (!surrogates && c >= 0xD800 && c <= 0xDFFF)) return false;
  *cp = c;
  *len = n;
  return true;
}


std::string_view escape_byte(uint8_t b) {
  return b < 0x80 ? std::string_view(kEscapes.text[b], kEscapes.size[b]) : std::string_view();
}

void encode_string(std::string_view s, std::string* out) {
  out->reserve(out->size() + s.size() + 2);
  *out += '"';
  for (unsigned char b : s) {
    if (b < 0x80 && kEscapes.size[b] != 0)
      out->append(kEscapes.text[b], kEscapes.size[b]);
    else
      *out += char(b);
  }
  *out += '"';
}

Expr string_literal(IrBuilder& ir, std::string_view s, bool shared) {
  (void)shared;  // ir.literal's shared node and a new ir.Bytes are one handle here
  std::string text;
  encode_string(s, &text);
  std::vector<Expr> parts;
  size_t run = 0;  // where the pending run of ASCII starts (all of an ASCII text: one literal)
  for (size_t i = 0; i < text.size();) {
    if (uint8_t(text[i]) < 0x80) {
      ++i;
      continue;
    }
    int32_t cp;
    size_t len;
    if (!decode_utf8(text, i, false, &cp, &len)) return kNoExpr;  // Python's encode("utf-8") raises
    if (run < i) parts.push_back(ir.literal(std::string_view(text).substr(run, i - run)));
    parts.push_back(non_ascii(ir, cp, std::string_view(text).substr(i, len)));
    i += len;
    run = i;
  }
  if (run < text.size()) parts.push_back(ir.literal(std::string_view(text).substr(run)));
  const Expr e = ir.seq(parts);
  return ir.ok() ? e : kNoExpr;
}

// _escape over the DAG, each distinct node once, without recursion (the nesting is a pattern's):
// a node is looked at again once its children are mapped.
Expr json_escape(IrBuilder& ir, Expr top) {
  if (top < 0 || size_t(top) >= ir.n_exprs()) return kNoExpr;
  std::unordered_map<Expr, Expr> done;
  std::vector<Expr> stack(1, top), kids;
  while (!stack.empty()) {
    const Expr e = stack.back();
    if (done.count(e)) {
      stack.pop_back();
      continue;
    }
    const int32_t k = ir.kind(e);
    Expr out = e;  // references, checks, and the nodes front-ends build whole
    if (k == BYTES) {
      out = escape_bytes(ir, ir.bytes(e));
    } else if (k == BYTESET) {
      out = escape_set(ir, e);
    } else if (k == SEQ || k == ALT || k == REPEAT || k == REGION) {
      if (k == SEQ || k == ALT) {
        const IrSpan<Expr> items = ir.items(e);
        kids.assign(items.begin(), items.end());
      } else {
        kids.assign(1, ir.item(e));
      }
      bool waiting = false;
      for (auto it = kids.rbegin(); it != kids.rend(); ++it)
        if (!done.count(*it)) stack.push_back(*it), waiting = true;
      if (waiting) continue;
      for (Expr& x : kids) x = done[x];
      if (k == SEQ)
        out = ir.seq(kids);
      else if (k == ALT)
        out = ir.alt(kids);
      else if (k == REPEAT)
        out = ir.make_repeat(kids[0], ir.repeat_min(e), ir.repeat_max(e));
      else
        out = ir.make_region(kids[0]);
    }
    stack.pop_back();
    done[e] = out;
  }
  return ir.ok() ? done[top] : kNoExpr;
}

TextExprs text_exprs(IrBuilder& ir) {
  TextExprs t;
  const IrRange all{0, kMaxCodePoint};
  t.any_char = ir.char_class(IrSpan<IrRange>(&all, 1));
  t.any_string = ir.repeat(t.any_char, 0, kUnbounded);
  t.json_char = json_escape(ir, t.any_char);
  return t;
}

Expr length_expr(IrBuilder& ir, int64_t lo, int64_t hi) {
  const IrRange all{0, kMaxCodePoint};
  const Expr e = ir.repeat(ir.char_class(IrSpan<IrRange>(&all, 1)), lo, hi);  // ANY_CHAR
  return ir.ok() ? e : kNoExpr;
}

}  // namespace tg::schema
