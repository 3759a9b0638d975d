#include "tools/number_flags.h"

#include <limits>
#include <sstream>

#include "zerotrain/config/field.h"
#include "zerotrain/core/error.h"

namespace zerotrain::tools {
namespace {

// `text` through the config's reader for T; a UsageError naming the flag when it is no T.
template <class T>
T read_as_config(const std::string& flag, const std::string& text, const char* range) {
  // Without exceptions: a text that is no JSON at all ("abc", "nan", "0x10") is a discarded value.
  const config::Json j = config::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  T value{};
  std::string expected;
  if (!j.is_discarded() && config::ValueTraits<T>::read(j, value, expected)) return value;
  // The range, not the reader's "an integer": 99999999999999999999 is one, but too large.
  throw UsageError(detail::str(flag, " ", text, ": expected ", range));
}

int64_t read_integer(const std::string& flag, const std::string& text) {
  return read_as_config<int64_t>(flag, text, "an integer from -2^63 to 2^63-1");
}

template <class T>
std::string shown(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, int64_t& target, const std::string& help) {
  return cmd
      .add_option_function<std::string>(
          flag, [flag, &target](const std::string& text) { target = read_integer(flag, text); }, help)
      ->type_name("INT")
      ->default_str(shown(target));
}

CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, int& target, const std::string& help) {
  return cmd
      .add_option_function<std::string>(
          flag,
          [flag, &target](const std::string& text) {
            const int64_t value = read_integer(flag, text);
            ZT_CHECK(value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max(), UsageError,
                     flag, " ", text, ": expected an integer from -2^31 to 2^31-1");
            target = static_cast<int>(value);
          },
          help)
      ->type_name("INT")
      ->default_str(shown(target));
}

CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, double& target, const std::string& help) {
  return cmd
      .add_option_function<std::string>(
          flag,
          [flag, &target](const std::string& text) {
            target = read_as_config<double>(flag, text, "a finite number");
          },
          help)
      ->type_name("FLOAT")
      ->default_str(shown(target));
}

CLI::Option* add_number_flag(CLI::App& cmd, const std::string& flag, std::optional<int64_t>& target,
                             const std::string& help) {
  auto* option = cmd.add_option_function<std::string>(
                         flag, [flag, &target](const std::string& text) { target = read_integer(flag, text); }, help)
                     ->type_name("INT");
  if (target) option->default_str(shown(*target));
  return option;
}

}  // namespace zerotrain::tools
