#include "experiments/model/export.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "experiments/process/build_info.h"
#include "util/files.h"

namespace ponder::cli {

namespace {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  throw std::invalid_argument("export: unknown dtype");
}

// The tensor's values as little-endian bytes of its own dtype (this machine is little-endian: x86-64, aarch64).
void append_bytes(const Tensor& t, std::string& out) {
  const std::vector<double> v = t.to_vector();
  for (double x : v) {
    char b[8];
    size_t n = dtype_size(t.dtype());
    if (t.dtype() == DType::F32) { const float f = float(x); std::memcpy(b, &f, 4); }
    else if (t.dtype() == DType::F64) std::memcpy(b, &x, 8);
    else if (t.dtype() == DType::I32) { const int32_t i = int32_t(x); std::memcpy(b, &i, 4); }
    else { const int64_t i = int64_t(x); std::memcpy(b, &i, 8); }
    out.append(b, n);
  }
}

}  // namespace

namespace {

void check_names(const ttt::Checkpoint& ck, const std::vector<std::string>& names) {
  if (names.size() != ck.params.size())
    throw std::invalid_argument("export: " + std::to_string(names.size()) + " names for " +
                                std::to_string(ck.params.size()) + " parameters");
}

}  // namespace

std::string safetensors_bytes(const ttt::Checkpoint& ck, const std::vector<std::string>& names) {
  check_names(ck, names);
  static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian bytes");
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"producer", std::string("ponder ") + version() + " (commit " + git_commit() + ")"},
                            {"step", std::to_string(ck.step)}, {"config", ck.config_text}};
  std::string data;
  for (size_t i = 0; i < ck.params.size(); ++i) {
    const ttt::NamedTensor& p = ck.params[i];
    if (header.contains(names[i])) throw std::invalid_argument("export: parameter '" + names[i] + "' appears twice");
    const size_t begin = data.size();
    append_bytes(p.value, data);
    header[names[i]] = {{"dtype", safetensors_dtype(p.value.dtype())}, {"shape", p.value.shape()},
                      {"data_offsets", {begin, data.size()}}};
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the format pads the header with spaces to a multiple of 8 bytes
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

void export_safetensors(const ttt::Checkpoint& ck, const std::vector<std::string>& names, const std::string& path) {
  util::write_atomically(path, safetensors_bytes(ck, names));
}

nlohmann::ordered_json parameter_summary(const ttt::Checkpoint& ck, const std::vector<std::string>& names) {
  check_names(ck, names);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < ck.params.size(); ++i) {
    const ttt::NamedTensor& p = ck.params[i];
    double sq = 0, sum = 0;
    for (double x : p.value.to_vector()) {
      sq += x * x;
      sum += x;
    }
    out.push_back({{"name", names[i]}, {"dtype", safetensors_dtype(p.value.dtype())}, {"shape", p.value.shape()},
                   {"l2", std::sqrt(sq)}, {"sum", sum}});
  }
  return out;
}

}  // namespace ponder::cli
