// The core's argument errors, shared by its .cpp files (not installed): every check that
// refuses an argument names it and says what was wrong, as std::invalid_argument (Python
// sees ValueError), before anything changed.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace livetail::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void fail(const std::string& name, const std::string& what) {
  throw std::invalid_argument(name + " " + what);
}

// "name[i]": the i-th element of an argument, for messages.
inline std::string at(const char* name, size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

}  // namespace livetail::detail
