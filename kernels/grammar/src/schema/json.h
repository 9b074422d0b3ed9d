// JSON values, read and written exactly as Python's json.loads and json.dumps (default
// arguments) do: the schema converter must see the schema Python's converter sees (a repeated
// key's last value, 1e400 as infinity, a lone surrogate kept) and write the constants it embeds
// in grammars byte for byte as Python writes them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../status.h"

namespace tg::schema {

enum class Kind : uint8_t { null, boolean, integer, number, string, array, object };

// A read-only run of a document's values or members.
template <class T>
class Span {
 public:
  Span() = default;
  Span(const T* data, uint32_t size) : data_(data), size_(size) {}
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](uint32_t i) const { return data_[i]; }

 private:
  const T* data_ = nullptr;
  uint32_t size_ = 0;
};

struct Member;

// A value inside a Document (a default-constructed one is null). Everything it points to lives
// in the document's arena, as long as the document.
class Value {
 public:
  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_integer() const { return kind_ == Kind::integer; }
  bool is_number() const { return kind_ == Kind::number; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  bool boolean() const { return u_.boolean; }
  // Python ints are unbounded: an integer is its text, and its int64 value when that holds it.
  bool fits_int64() const { return kind_ == Kind::integer && fits_; }
  int64_t int64() const { return fits_ ? u_.integer : 0; }
  double number() const { return u_.number; }  // a float's value

  // An integer's str() (no leading zeros, no sign on zero), a float's repr() ("1e+16", "0.0001",
  // "-0.0", "inf", "nan"), a string's bytes: UTF-8, and WTF-8 for a lone surrogate (its code
  // point's 3-byte form), which only a `\uD800`-style escape makes.
  std::string_view text() const { return {static_cast<const char*>(data_), size_}; }

  Span<Value> items() const;     // an array's elements
  Span<Member> members() const;  // an object's members, in Python's dict order
  uint32_t size() const { return size_; }  // elements or members (text bytes for the others)
  // An object's member value by key (binary search when the object is large), or nullptr.
  const Value* find(std::string_view key) const;

 private:
  friend class Builder;
  Kind kind_ = Kind::null;
  bool fits_ = false;
  uint32_t size_ = 0;
  const void* data_ = nullptr;  // text bytes, elements or members
  union {
    bool boolean;
    int64_t integer;
    double number;
    const uint32_t* index;  // a large object's member positions sorted by key
  } u_ = {};
};

struct Member {
  std::string_view key;
  Value value;
};

inline Span<Value> Value::items() const {
  return kind_ == Kind::array ? Span<Value>(static_cast<const Value*>(data_), size_) : Span<Value>();
}
inline Span<Member> Value::members() const {
  return kind_ == Kind::object ? Span<Member>(static_cast<const Member*>(data_), size_) : Span<Member>();
}

// Owns the values of one parsed text: they are allocated in blocks (no allocation per value) and
// stay where they are when the document is moved.
class Document {
 public:
  Document() = default;
  Document(Document&&) = default;
  Document& operator=(Document&&) = default;
  Document(const Document&) = delete;
  Document& operator=(const Document&) = delete;

  const Value& root() const { return root_; }
  // Whether a key or string of the value holds a lone surrogate (Python keeps them; UTF-8 cannot
  // say them). One only in a repeated key's dropped value does not count.
  bool has_lone_surrogate() const { return lone_surrogate_; }

 private:
  friend class Builder;
  void clear();
  void* allocate(size_t bytes, size_t align);

  std::vector<std::unique_ptr<char[]>> blocks_;
  char* free_ = nullptr;  // the unused end of the last block
  size_t free_size_ = 0;
  size_t next_block_ = 0;
  Value root_;
  bool lone_surrogate_ = false;
};

// Python's recursion limit stops json.loads near 1,000 levels; callers may allow more.
constexpr int32_t kDefaultMaxDepth = 1000;
constexpr size_t kMaxTextBytes = size_t{1} << 30;  // keeps every count in 32 bits
constexpr size_t kMaxIntDigits = 4300;              // Python 3.11's int('...') limit

// Parses `text` (UTF-8) into `out` as json.loads(text) would, or says why not: a syntax error,
// invalid UTF-8 or an integer of more than 4,300 digits (Code::argument), more than `max_depth`
// nested containers or a text over kMaxTextBytes (Code::limit). The message gives the byte
// offset, which is also stored in `*error_offset` when given. `out` is cleared first.
Status parse(std::string_view text, Document* out, int32_t max_depth = kDefaultMaxDepth,
             size_t* error_offset = nullptr);

// json.dumps(value): ASCII only, separators ", " and ": ", NaN and Infinity as Python spells them.
std::string dumps(const Value& value);
void dump(const Value& value, std::string* out);  // appends
// One string as json.dumps writes it, quotes included; `s` is UTF-8 or WTF-8.
void dump_string(std::string_view s, std::string* out);
// repr(float(d)): the shortest digits that read back as `d`, laid out as Python does.
std::string float_repr(double d);

}  // namespace tg::schema
