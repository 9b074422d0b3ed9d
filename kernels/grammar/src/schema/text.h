// Strings for the JSON Schema port: json_schema/_text.py's JSON string encoding (keys and
// constants), the JSON escaping of an expression over decoded UTF-8 bytes, ANY_CHAR, ANY_STRING
// and JSON_CHAR, and length_expr. The same calls build the same expressions as the Python, so
// the grammars' words are its words; where the Python raises (a lone surrogate) these return
// kNoExpr and the caller declines.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "ir_build.h"

namespace tg::schema {

// escape_byte: the JSON spelling of an ASCII byte that must be escaped (`\"`, `\\`, `\b`, `\f`,
// `\n`, `\r`, `\t`, else `\u00xx` for a control byte); empty for any other byte.
std::string_view escape_byte(uint8_t b);

// encode_string: what json.dumps(s, ensure_ascii=False) writes, quotes included, appended to
// `out`: escape_byte for the bytes it names, every other byte as it is (UTF-8 or WTF-8 alike).
void encode_string(std::string_view s, std::string* out);

// One character of UTF-8 at s[i]: its code point and length, or false (an overlong form, past
// U+10FFFF, cut short, or a surrogate unless `surrogates`: WTF-8's, as json.h keeps a lone one).
bool decode_utf8(std::string_view s, size_t i, bool surrogates, int32_t* cp, size_t* len);

// string_literal: the JSON text of the string `s` (UTF-8), quotes included: ASCII as
// encode_string writes it, each other character raw or as its \u escape(s) (either-case hex).
// `shared` is the Python's node-sharing hint; equal nodes are one handle here, so it changes
// nothing. kNoExpr for a lone surrogate (WTF-8) or invalid UTF-8, where the Python raises.
Expr string_literal(IrBuilder& ir, std::string_view s, bool shared = true);

// json_escape: an expression over decoded UTF-8 bytes mapped onto JSON string-body bytes (each
// byte JSON must escape replaced by its escape). Every expression kind, as the Python: bytes and
// byte sets rewritten, sequences, choices, repetitions and regions rebuilt, the rest kept.
Expr json_escape(IrBuilder& ir, Expr e);

// The module's constants, built in one builder.
struct TextExprs {
  Expr any_char;    // ANY_CHAR: one code point, decoded
  Expr any_string;  // ANY_STRING: every decoded string
  Expr json_char;   // JSON_CHAR: one code point as a JSON string holds it
};
TextExprs text_exprs(IrBuilder& ir);

// length_expr: lo..hi decoded characters (hi kUnbounded for None).
Expr length_expr(IrBuilder& ir, int64_t lo, int64_t hi);

}  // namespace tg::schema
