// The three code benchmarks `ponder codebench` runs, read at run time from a folder (never copied into the
// repository): HumanEval.jsonl.gz, mbpp.jsonl and ClassEval_data.json. Each problem becomes one Python program:
//   HumanEval  prompt + canonical solution (the function body) + test + check(entry_point)
//   MBPP       code + test_setup_code + the asserts of test_list (the setup comes after the code because the two
//              problems that have one build objects of classes the code defines)
//   ClassEval  solution code + its unittest classes, run by unittest.main
// Each program starts by seeding Python's `random` (some tests draw from it), and exits 0 exactly when every test
// passed.
#pragma once
#include <string>
#include <vector>

namespace ponder::codebench {

enum class Bench { HumanEval, MBPP, ClassEval };
Bench parse_bench(const std::string& name);  // humaneval | mbpp | classeval; throws naming the value
const char* bench_name(Bench b);
const char* bench_file(Bench b);  // its file in the bench folder

struct Task {
  std::string id;        // "HumanEval/0", "11" (MBPP's number), "ClassEval_0"
  std::string solution;  // the canonical solution: what mutations change and what a model's completion replaces
  std::string head, tail;  // the program is head + solution + tail
  std::string prompt;      // what a model continues: HumanEval's prompt, MBPP's description with its first test,
                           // ClassEval's class skeleton (a later full class definition replaces the skeleton's)
  std::vector<std::string> stops;  // a completion ends before the first of these
  std::string program(const std::string& solution_text) const { return head + solution_text + tail; }
  // The program around a model's completion of `prompt`.
  std::string sample_program(const std::string& completion) const;
};

// --bench-dir's default: $PONDER_BENCH_DIR, else ../shared/bench (relative to the current directory).
std::string default_bench_dir();
// Every problem of `b`, in file order. Throws one line naming the path when the folder or file is missing, a line
// is not JSON, or a field is missing or of the wrong type.
std::vector<Task> load_tasks(Bench b, const std::string& dir);

}  // namespace ponder::codebench
