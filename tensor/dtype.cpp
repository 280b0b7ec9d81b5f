#include "tensor/dtype.h"

#include <stdexcept>

namespace ponder {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

void throw_dtype(const char* where, DType t) {
  throw std::invalid_argument(std::string(where) + ": dtype " + dtype_name(t) + " is not supported here");
}

}  // namespace ponder
