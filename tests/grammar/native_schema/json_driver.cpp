// Reads JSON texts from stdin, each as its byte count on a line and then its bytes, and prints a
// line for each: "ok <0|1: a lone surrogate> <dumps>" or "error <code> <byte offset> <message>".
// Every object's lookup is checked too: each key finds its member, a key it lacks finds nothing
// (a failure prints "error 99").
//   --max-depth N   the parser's nesting limit (default: the library's)
//   --bench R       parse each text R times and print "bench <bytes> <fastest ns>" instead
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "json.h"

namespace json = tg::schema;

// Whether find() agrees with members() in every object of the document (iteratively: the
// documents are as deep as the parser allows).
bool lookups_agree(const json::Value& root) {
  std::vector<const json::Value*> todo = {&root};
  std::string absent;
  while (!todo.empty()) {
    const json::Value* v = todo.back();
    todo.pop_back();
    for (const json::Value& item : v->items()) todo.push_back(&item);
    for (const json::Member& m : v->members()) {
      if (v->find(m.key) != &m.value) return false;
      absent.assign(m.key.data(), m.key.size());
      absent.push_back('\xff');  // no key holds this byte
      if (v->find(absent) != nullptr) return false;
      todo.push_back(&m.value);
    }
  }
  return true;
}

int main(int argc, char** argv) {
  int32_t max_depth = json::kDefaultMaxDepth;
  int bench = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--max-depth") == 0) max_depth = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--bench") == 0) bench = std::atoi(argv[i + 1]);
    else return std::fprintf(stderr, "unknown option %s\n", argv[i]), 2;
  }
  std::string text, out;
  json::Document doc;
  unsigned long size = 0;
  while (std::scanf("%lu", &size) == 1) {
    if (std::getchar() != '\n') return std::fprintf(stderr, "bad record header\n"), 2;
    text.resize(size);
    if (size > 0 && std::fread(&text[0], 1, size, stdin) != size) return std::fprintf(stderr, "short record\n"), 2;
    if (bench > 0) {
      long long best = -1;
      for (int r = 0; r < bench; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const tg::Status st = json::parse(text, &doc);
        const auto t1 = std::chrono::steady_clock::now();
        if (!st.ok()) return std::fprintf(stderr, "%s\n", st.message.c_str()), 1;
        const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
        if (best < 0 || ns < best) best = ns;
      }
      std::printf("bench %lu %lld\n", size, best);
      continue;
    }
    size_t offset = 0;
    const tg::Status st = json::parse(text, &doc, max_depth, &offset);
    if (!st.ok()) {
      std::printf("error %d %zu %s\n", int(st.code), offset, st.message.c_str());
      continue;
    }
    if (!lookups_agree(doc.root())) {
      std::printf("error 99 0 find() disagrees with members()\n");
      continue;
    }
    out.clear();
    json::dump(doc.root(), &out);
    std::printf("ok %d ", doc.has_lone_surrogate() ? 1 : 0);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::putchar('\n');
  }
  return 0;
}
