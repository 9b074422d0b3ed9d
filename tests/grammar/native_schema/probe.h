// What the test probes of this folder share: a probe answers in a malloc'd C string, which the
// caller hands back to probe_free (probe.cpp).
#pragma once
#include <cstdlib>
#include <cstring>
#include <string>

inline char* give(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.data(), s.size() + 1);
  return out;
}
