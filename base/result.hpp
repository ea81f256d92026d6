// result<T>: a value or an error message a user can act on. Pure code returns these instead of
// throwing or exiting; programs turn errors into exit codes.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace pipeworks {

struct error {
  std::string message;
};

// Thrown only where a result cannot be returned (constructors, deep call chains); programs catch it.
struct pipeworks_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}
  result(error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const { return std::get<1>(v_); }
  const std::string& message() const { return std::get<1>(v_).message; }

 private:
  void check() const {
    if (!ok()) throw pipeworks_error(std::get<1>(v_).message);
  }
  std::variant<T, error> v_;
};

// result<void>: success or an error.
struct status {
  status() = default;
  status(error e) : err_(std::move(e.message)), failed_(true) {}
  static status success() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return err_; }
  void throw_if_error() const {
    if (failed_) throw pipeworks_error(err_);
  }

 private:
  std::string err_;
  bool failed_ = false;
};

inline error make_error(std::string message) { return error{std::move(message)}; }

}  // namespace pipeworks
