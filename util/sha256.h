// SHA-256 (FIPS 180-4), so that every corpus file is checked against the hash its results cite.
#pragma once
#include <string>
#include <string_view>

namespace ponder::util {

// Lower-case hex digest (64 characters) of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace ponder::util
