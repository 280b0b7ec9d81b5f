#include "data/byte_tokenizer.h"

#include <stdexcept>

namespace ponder::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw std::invalid_argument("ByteTokenizer::decode: id " + std::to_string(ids[i]) + " at position " +
                                  std::to_string(i) + " is outside [0, 256)");
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

}  // namespace ponder::data
