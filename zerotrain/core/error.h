// Typed errors for everything a user or the environment can cause, and the check macros.
//
//   ZT_CHECK(cond, ErrorType, parts...)  throws ErrorType (a zerotrain::Error) with the
//                                        concatenated parts when cond is false.
//   ZT_INTERNAL_ASSERT(cond, parts...)   an invariant; throws InternalError. Stays on in
//                                        release builds: a wrong result is worse than a stop.
//
// Library code never exits or aborts: only tools/main.cpp maps these to exit codes
// (see exit_code() and docs/errors.md).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace zerotrain {

// Base of every error zerotrain throws on purpose. `component` is the short tag printed in
// brackets ("config", "comm", ...), so a message reads "[config] zero_optimization.stage: ...".
class Error : public std::runtime_error {
 public:
  Error(std::string component, const std::string& message);
  const std::string& component() const { return component_; }
  // The message without the "[component] " prefix.
  const std::string& message() const { return message_; }
  // Process exit code the command-line tool uses for this kind of error.
  virtual int exit_code() const { return 1; }

 private:
  std::string component_;
  std::string message_;
};

class ConfigError : public Error {   // bad or inconsistent ds_config / trainer arguments
 public:
  explicit ConfigError(const std::string& message) : Error("config", message) {}
  int exit_code() const override { return 3; }
};

class UsageError : public Error {    // bad command-line use of a tool
 public:
  explicit UsageError(const std::string& message) : Error("usage", message) {}
  int exit_code() const override { return 2; }
};

class NotSupported : public Error {  // a valid request that zerotrain does not implement
 public:
  explicit NotSupported(const std::string& message) : Error("not supported", message) {}
  int exit_code() const override { return 4; }
};

class CommError : public Error {     // collectives, rendezvous, peers
 public:
  explicit CommError(const std::string& message, std::string component = "comm")
      : Error(std::move(component), message) {}
  int exit_code() const override { return 5; }
};

class TimeoutError : public CommError {
 public:
  explicit TimeoutError(const std::string& message) : CommError(message, "timeout") {}
  int exit_code() const override { return 6; }
};

class IoError : public Error {       // files, disks, checkpoints on disk
 public:
  explicit IoError(const std::string& message, std::string component = "io")
      : Error(std::move(component), message) {}
  int exit_code() const override { return 7; }
};

class CheckpointError : public IoError {
 public:
  explicit CheckpointError(const std::string& message) : IoError(message, "checkpoint") {}
  int exit_code() const override { return 8; }
};

class NumericsError : public Error { // training cannot go on: fp16 gradients overflow at every loss
 public:                              // scale, or fp32/bf16 gradients are not finite
  explicit NumericsError(const std::string& message, std::string component = "fp16")
      : Error(std::move(component), message) {}
  int exit_code() const override { return 9; }
};

class ResourceError : public Error { // the machine lacks what the job needs: memory above all
 public:
  explicit ResourceError(const std::string& message, std::string component = "memory")
      : Error(std::move(component), message) {}
  int exit_code() const override { return 10; }
};

class Preempted : public Error {     // a signal asked the run to stop; a checkpoint was saved first
 public:
  explicit Preempted(const std::string& message) : Error("signal", message) {}
  int exit_code() const override { return 143; }   // 128 + SIGTERM, as a process stopped by it
};

class InternalError : public Error { // a zerotrain bug
 public:
  explicit InternalError(const std::string& message) : Error("internal", message) {}
  int exit_code() const override { return 70; }   // EX_SOFTWARE
};

namespace detail {
template <class... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

}  // namespace zerotrain

#define ZT_CHECK(cond, ErrorType, ...)                                   \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      throw ErrorType(::zerotrain::detail::str(__VA_ARGS__));            \
    }                                                                    \
  } while (0)

#define ZT_INTERNAL_ASSERT(cond, ...)                                                      \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      ::zerotrain::detail::throw_internal(__FILE__, __LINE__, #cond,                       \
                                          ::zerotrain::detail::str("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                      \
  } while (0)
