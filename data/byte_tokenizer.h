// The default tokenizer: one token per byte (vocabulary 256), so any UTF-8 text round-trips exactly and bits
// per token equal bits per byte.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ponder::data {

class ByteTokenizer {
 public:
  static constexpr int vocab_size = 256;
  std::vector<int32_t> encode(std::string_view text) const;
  // Throws std::invalid_argument naming the first id outside [0, 256) and its position.
  std::string decode(const std::vector<int32_t>& ids) const;
};

}  // namespace ponder::data
