// Element types and devices, and the dispatch macros that turn a runtime dtype into a C++ type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ponder {

enum class DType : uint8_t { F32, F64, I32, I64 };
enum class Device : uint8_t { CPU, CUDA };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
const char* device_name(Device d);
inline bool is_float(DType t) { return t == DType::F32 || t == DType::F64; }

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }

[[noreturn]] void throw_dtype(const char* where, DType t);

}  // namespace ponder

// Runs the body with `scalar_t` bound to the C++ type of a floating dtype.
#define PONDER_DISPATCH_FLOAT(DT, WHERE, ...)                                   \
  [&] {                                                                       \
    switch (DT) {                                                             \
      case ::ponder::DType::F32: { using scalar_t = float; return __VA_ARGS__(); }  \
      case ::ponder::DType::F64: { using scalar_t = double; return __VA_ARGS__(); } \
      default: ::ponder::throw_dtype(WHERE, DT);                              \
    }                                                                         \
  }()

// Same for every dtype (floats and integers).
#define PONDER_DISPATCH_ALL(DT, WHERE, ...)                                     \
  [&] {                                                                       \
    switch (DT) {                                                             \
      case ::ponder::DType::F32: { using scalar_t = float; return __VA_ARGS__(); }   \
      case ::ponder::DType::F64: { using scalar_t = double; return __VA_ARGS__(); }  \
      case ::ponder::DType::I32: { using scalar_t = int32_t; return __VA_ARGS__(); } \
      case ::ponder::DType::I64: { using scalar_t = int64_t; return __VA_ARGS__(); } \
    }                                                                         \
    ::ponder::throw_dtype(WHERE, DT);                                         \
  }()
