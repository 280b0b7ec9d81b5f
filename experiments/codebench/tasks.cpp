#include "experiments/codebench/tasks.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "experiments/codebench/sandbox.h"

namespace ponder::codebench {
namespace codebench_tasks {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Where a field comes from, for error lines: "DIR/mbpp.jsonl line 12".
struct Place {
  std::string path;
  size_t line = 0;
  std::string text() const { return line ? path + " line " + std::to_string(line) : path; }
};

std::string text_field(const json& j, const char* key, const Place& at) {
  if (!j.is_object() || !j.contains(key)) throw std::runtime_error(at.text() + ": no field '" + key + "'");
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());  // MBPP numbers its problems
  throw std::runtime_error(at.text() + ": field '" + std::string(key) + "' is not a string");
}

std::vector<std::string> text_list(const json& j, const char* key, const Place& at) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_array())
    throw std::runtime_error(at.text() + ": no list field '" + key + "'");
  std::vector<std::string> out;
  for (const json& v : j.at(key)) {
    if (!v.is_string()) throw std::runtime_error(at.text() + ": field '" + std::string(key) + "' holds a non-string");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// gzip itself decompresses (Debian always has it), so the engine needs no zlib.
std::string read_gzip(const std::string& path) {
  const sandbox::Result r = sandbox::run_command({"gzip", "-dc", "--", path}, 120);
  if (!r.passed()) {
    const size_t b = std::min(r.err.find_first_not_of("\r\n"), r.err.size());  // gzip starts with an empty line
    const std::string why = r.err.substr(b, r.err.find('\n', b) - b);
    throw std::runtime_error("cannot decompress " + path + ": " + (why.empty() ? "gzip failed" : why));
  }
  return r.out;
}

json parse_line(const std::string& line, const Place& at) {
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(at.text() + ": malformed JSON (" + std::string(e.what()) + ")");
  }
}

// One JSON object per non-empty line, with its line number.
std::vector<std::pair<size_t, json>> read_jsonl(const std::string& text, const std::string& path) {
  std::vector<std::pair<size_t, json>> rows;
  std::istringstream in(text);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n)
    if (line.find_first_not_of(" \t\r") != std::string::npos) rows.emplace_back(n, parse_line(line, {path, n}));
  return rows;
}

// The first line of every program: some tests draw random numbers (ClassEval_58 places mines at random and fails
// when two land on the same cell), so every run draws the same ones. __import__ binds no name in the program.
constexpr const char* kPrelude = "__import__('random').seed(0)\n";

// Stops shared by all: a completion that starts a new top-level statement has finished its definition.
const std::vector<std::string> kTopLevelStops = {"\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\nassert ", "\n#"};

Task humaneval_task(const json& j, const Place& at) {
  Task t;
  t.id = text_field(j, "task_id", at);
  t.prompt = text_field(j, "prompt", at);
  t.head = kPrelude + t.prompt;
  t.solution = text_field(j, "canonical_solution", at);
  t.tail = "\n\n" + text_field(j, "test", at) + "\n\ncheck(" + text_field(j, "entry_point", at) + ")\n";
  t.stops = kTopLevelStops;
  return t;
}

Task mbpp_task(const json& j, const Place& at) {
  Task t;
  t.id = text_field(j, "task_id", at);
  t.head = kPrelude;
  t.solution = text_field(j, "code", at);
  const std::vector<std::string> tests = text_list(j, "test_list", at);
  t.tail = "\n\n" + text_field(j, "test_setup_code", at) + "\n\n";
  for (const std::string& a : tests) t.tail += a + "\n";
  t.prompt = "\"\"\"\n" + text_field(j, "text", at) + "\n" + (tests.empty() ? "" : tests[0] + "\n") + "\"\"\"\n";
  t.stops = {"\nassert ", "\nif __name__", "\nprint(", "\n\"\"\"", "\n\n\n"};
  return t;
}

Task classeval_task(const json& j, const Place& at) {
  Task t;
  t.id = text_field(j, "task_id", at);
  t.head = kPrelude;
  t.solution = text_field(j, "solution_code", at);
  t.tail = "\n\n" + text_field(j, "test", at) + "\n\nimport unittest\n\nif __name__ == '__main__':\n    unittest.main()\n";
  t.prompt = text_field(j, "skeleton", at) + "\n\n";
  t.stops = {"\nif __name__", "\nimport unittest", "\nclass Test", "\n\n\n\n"};
  return t;
}

}  // namespace
}  // namespace codebench_tasks

Bench parse_bench(const std::string& name) {
  using namespace codebench_tasks;
  if (name == "humaneval") return Bench::HumanEval;
  if (name == "mbpp") return Bench::MBPP;
  if (name == "classeval") return Bench::ClassEval;
  throw std::invalid_argument("unknown benchmark '" + name + "' (humaneval, mbpp, classeval)");
}

const char* bench_name(Bench b) {
  using namespace codebench_tasks;
  return b == Bench::HumanEval ? "humaneval" : b == Bench::MBPP ? "mbpp" : "classeval";
}

const char* bench_file(Bench b) {
  using namespace codebench_tasks;
  return b == Bench::HumanEval ? "HumanEval.jsonl.gz" : b == Bench::MBPP ? "mbpp.jsonl" : "ClassEval_data.json";
}

std::string Task::sample_program(const std::string& completion) const {
  return codebench_tasks::kPrelude + prompt + completion + tail;
}

std::string default_bench_dir() {
  using namespace codebench_tasks;
  const char* env = std::getenv("PONDER_BENCH_DIR");
  return env && *env ? env : "../shared/bench";
}

std::vector<Task> load_tasks(Bench b, const std::string& dir) {
  using namespace codebench_tasks;
  if (!fs::is_directory(dir))
    throw std::runtime_error("benchmark folder " + dir + " not found (--bench-dir or PONDER_BENCH_DIR names it)");
  const std::string path = (fs::path(dir) / bench_file(b)).string();
  if (!fs::is_regular_file(path)) throw std::runtime_error("benchmark file " + path + " not found");
  std::vector<Task> tasks;
  if (b == Bench::ClassEval) {
    json all;
    try {
      all = json::parse(read_file(path));
    } catch (const json::parse_error& e) {
      throw std::runtime_error(path + ": malformed JSON (" + std::string(e.what()) + ")");
    }
    if (!all.is_array()) throw std::runtime_error(path + ": expected a JSON list of problems");
    for (size_t i = 0; i < all.size(); ++i) tasks.push_back(classeval_task(all[i], {path + " problem", i + 1}));
  } else {
    const bool gz = b == Bench::HumanEval;
    // Line numbers of a compressed file count lines of its decompressed text.
    for (const auto& [line, row] : read_jsonl(gz ? read_gzip(path) : read_file(path), path))
      tasks.push_back(gz ? humaneval_task(row, {path + " (decompressed)", line}) : mbpp_task(row, {path, line}));
  }
  if (tasks.empty()) throw std::runtime_error(path + " holds no problems");
  return tasks;
}

}  // namespace ponder::codebench
