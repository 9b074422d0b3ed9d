// Error reporting without exceptions: functions return a Status, the C ABI stores it.
#pragma once
#include <string>

namespace tg {

enum class Code { ok = 0, argument = 1, ir = 2, grammar = 3, limit = 4, internal = 5, declined = 6 };

struct Status {
  Code code = Code::ok;
  std::string message;
  int rule = -1;  // the rule the error is about, when there is one
  bool ok() const { return code == Code::ok; }
  static Status error(Code code, std::string message, int rule = -1) {
    return Status{code, std::move(message), rule};
  }
};

}  // namespace tg
