// Test-only, compiled into _core only when LIVETAIL_SANITIZE is on: known bad operations
// that AddressSanitizer and UndefinedBehaviorSanitizer must report. native/sanitize.sh
// runs them first and fails if a report is missing, which proves the instrumented module
// is the one the tests import and that its reports reach the log directory.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <climits>
#include <memory>
#include <stdexcept>
#include <string>

namespace nb = nanobind;

namespace livetail {

// Named, never inlined: the control requires each report's top frame to name the function
// and its file:line, which only an unstripped module with debug lines gives.
[[gnu::noinline]] long long control_read_past_the_end() {
  auto pages = std::make_unique<int[]>(4);
  volatile int past_end = 4;  // volatile: the compiler cannot see the index
  return pages[past_end];
}

[[gnu::noinline]] long long control_signed_overflow() {
  volatile int top = INT_MAX;
  return top + 1;
}

void bind_sanitizer_control(nb::module_& m) {
  m.def(
      "_sanitizer_control",
      [](const std::string& kind) -> long long {
        if (kind == "heap-buffer-overflow") return control_read_past_the_end();
        if (kind == "signed-integer-overflow") return control_signed_overflow();
        throw std::invalid_argument("kind must be 'heap-buffer-overflow' or "
                                    "'signed-integer-overflow', not '" + kind + "'");
      },
      nb::arg("kind"), "Test-only (sanitizer builds): make a known bad access of this kind.");
}

}  // namespace livetail
