// What produced a result: version, commit and build type, stamped by experiments/meson.build.
#pragma once

namespace ponder::cli {

const char* version();
const char* git_commit();  // `git describe --always --dirty` at build time, "unknown" outside a checkout
const char* build_type();

}  // namespace ponder::cli
